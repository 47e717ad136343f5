"""The generation loop over the PyTorch backend, checked against transformers itself."""
from __future__ import annotations

import numpy as np
import pytest

from chatlab.backends.torch import TorchBackend
from chatlab.errors import ChatlabError
from chatlab.generate import Finished, SamplingParams, TextDelta, generate

QUESTIONS = ["What is the capital of France?", "Write a haiku about rain.",
             "List three prime numbers."]


@pytest.fixture(scope="module")
def backend(smollm2, smollm2_path):
    model, tok = smollm2
    return TorchBackend(model, tok, smollm2_path)


def prompt(tok, question: str) -> list[int]:
    text = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                   add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


def run(backend, ids, **kw) -> tuple[list[TextDelta], Finished]:
    events = list(generate(backend, ids, SamplingParams(**kw)))
    *deltas, fin = events
    assert isinstance(fin, Finished) and all(isinstance(d, TextDelta) for d in deltas)
    return deltas, fin


@pytest.mark.parametrize("question", QUESTIONS[:2])
def test_greedy_equals_hf_generate(backend, question):
    import torch

    ids = prompt(backend.tokenizer, question)
    _, fin = run(backend, ids, max_new_tokens=40)
    with torch.inference_mode():
        out = backend.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     max_new_tokens=40, do_sample=False)
    hf = out[0, len(ids):].tolist()
    if 2 in hf:  # HF pads after eos; both stop on it
        hf = hf[:hf.index(2) + 1]
    assert fin.token_ids == hf and len(hf) > 5


def test_kv_cache_equals_recomputing_everything(backend):
    """Each cached step's logits match a fresh forward over the whole sequence."""
    import torch

    ids = prompt(backend.tokenizer, QUESTIONS[2])
    _, fin = run(backend, ids, max_new_tokens=12, ignore_eos=True)
    seq = ids + fin.token_ids
    with torch.inference_mode():
        full = backend.model(torch.tensor([seq])).logits[0]  # no cache at all
    uncached = full[len(ids) - 1:-1].argmax(-1).tolist()
    assert uncached == fin.token_ids
    backend.prefill(ids)
    for pos, tok in enumerate(fin.token_ids[:-1]):
        step = backend.step(tok)
        assert np.allclose(step, full[len(ids) + pos].numpy(), atol=1e-3)


def test_stops_on_eos_with_counts_and_text(backend):
    ids = prompt(backend.tokenizer, QUESTIONS[0])
    deltas, fin = run(backend, ids, max_new_tokens=200)
    assert fin.finish_reason == "stop" and fin.stop_reason == 2  # <|im_end|>, from generation_config
    assert fin.token_ids[-1] == 2 and fin.completion_tokens == len(fin.token_ids)
    assert fin.prompt_tokens == len(ids)
    assert fin.text == "".join(d.text for d in deltas) == backend.tokenizer.decode(fin.token_ids[:-1])
    assert "Paris" in fin.text


def test_length_finish(backend):
    _, fin = run(backend, prompt(backend.tokenizer, QUESTIONS[1]), max_new_tokens=5)
    assert fin.finish_reason == "length" and fin.completion_tokens == 5 and fin.stop_reason is None


def test_stop_string_split_across_tokens_is_cut(backend):
    ids = prompt(backend.tokenizer, QUESTIONS[1])
    _, full = run(backend, ids, max_new_tokens=30, ignore_eos=True)
    # Pick a stop string that straddles a token boundary in the greedy reply.
    pieces = [backend.tokenizer.decode(full.token_ids[:n]) for n in range(len(full.token_ids) + 1)]
    cut = len(pieces[6])
    stop = full.text[cut - 2:cut + 3]
    assert len(stop) == 5 and stop in full.text
    deltas, fin = run(backend, ids, max_new_tokens=30, ignore_eos=True, stop=[stop])
    at = full.text.find(stop)
    assert fin.finish_reason == "stop" and fin.stop_reason == stop
    assert fin.text == full.text[:at]
    assert all(stop not in d.text for d in deltas) and "".join(d.text for d in deltas) == fin.text


def test_seeded_sampling_is_reproducible(backend):
    ids = prompt(backend.tokenizer, QUESTIONS[1])
    kw = dict(max_new_tokens=20, temperature=1.2, top_p=0.95, top_k=50, ignore_eos=True)
    a = run(backend, ids, seed=11, **kw)[1].token_ids
    assert a == run(backend, ids, seed=11, **kw)[1].token_ids
    assert a != run(backend, ids, seed=12, **kw)[1].token_ids


class ForceToken:
    """A logits processor in the contract's shape: force one token, then terminate."""

    def __init__(self, token: int, after: int) -> None:
        self.token, self.after, self.accepted = token, after, []

    def mask(self, logits):
        logits[:] = -np.inf
        logits[self.token] = 0.0
        return logits

    def accept(self, token_id: int) -> None:
        self.accepted.append(token_id)

    def is_terminated(self) -> bool:
        return len(self.accepted) >= self.after


def test_logits_processor_masks_accepts_and_terminates(backend):
    target = backend.tokenizer.encode(" yes", add_special_tokens=False)[0]
    proc = ForceToken(target, after=3)
    events = list(generate(backend, prompt(backend.tokenizer, QUESTIONS[0]),
                           SamplingParams(max_new_tokens=50), logits_processor=proc))
    fin = events[-1]
    assert fin.token_ids == [target] * 3 == proc.accepted and fin.finish_reason == "stop"


def test_should_stop_ends_generation(backend):
    calls = []
    stop_after_two = lambda: calls.append(1) or len(calls) >= 2  # noqa: E731
    fin = list(generate(backend, prompt(backend.tokenizer, QUESTIONS[1]),
                        SamplingParams(max_new_tokens=50, ignore_eos=True), should_stop=stop_after_two))[-1]
    assert fin.completion_tokens == 2 and fin.finish_reason == "stop"


def test_bad_requests(backend):
    with pytest.raises(ChatlabError, match="context window"):
        list(generate(backend, [1] * 8000, SamplingParams(max_new_tokens=500)))
    with pytest.raises(ChatlabError, match="empty"):
        list(generate(backend, [], SamplingParams()))
