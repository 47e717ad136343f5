"""Prompt-lookup speculation on the real model: token-identical to plain greedy decoding on
every eval-set task shape, on both backends that can roll back (slow: loads the model)."""
from __future__ import annotations

import os

import pytest

from chatlab.lab.evals.retrieval import TASKS, task_prompts
from chatlab.errors import ChatlabError
from chatlab.generate import Finished, SamplingParams, generate
from chatlab.generate.speculate import Speculation

TOKENS = 48
# Every case of every task by default; CHATLAB_SPECULATE_CASES=N checks the first N of each (a
# quick look on a loaded machine; the full run is ~2-3 minutes on a quiet 2-core CPU)
CASES = int(os.environ.get("CHATLAB_SPECULATE_CASES", "0")) or None


def finished(backend, ids, spec=None, **kw) -> Finished:
    *_, fin = generate(backend, ids, SamplingParams(max_new_tokens=TOKENS, **kw), speculate=spec)
    return fin


def check_identical(backend, task: str, limit: int | None) -> dict[str, float]:
    spec = Speculation(draft_tokens=4, ngram=3)
    accepted = drafted = 0.0
    for ids in task_prompts(backend.tokenizer, task, limit):
        plain, fast = finished(backend, ids), finished(backend, ids, spec)
        assert fast.token_ids == plain.token_ids, (task, ids[-8:])
        assert fast.text == plain.text and fast.finish_reason == plain.finish_reason
        accepted += fast.speculation["accepted_tokens"]
        drafted += fast.speculation["drafted_tokens"]
    return {"accepted": accepted, "drafted": drafted}


@pytest.mark.parametrize("task", TASKS)
def test_openvino_paged_greedy_identical_on_every_eval_case(ov_backend, task):
    counts = check_identical(ov_backend, task, CASES)
    if task != "story":  # the copy-heavy shapes really exercise the verify/rollback path
        assert counts["accepted"] > 0 and counts["drafted"] > counts["accepted"]


@pytest.mark.parametrize("task", TASKS)
def test_torch_greedy_identical(torch_backend, task):
    counts = check_identical(torch_backend, task, min(CASES or 4, 4))  # torch fp32: ~4x slower
    if task != "story":
        assert counts["accepted"] > 0


def test_stop_strings_and_penalty_match_plain(ov_backend):
    ids = task_prompts(ov_backend.tokenizer, "extract", 1)[0]
    spec = Speculation(draft_tokens=6, ngram=2)
    for kw in ({"stop": ["color"]}, {"repetition_penalty": 1.3}, {"max_new_tokens": 7},
               {"logit_bias": {29: -100, 30: 5.0}}):
        kw = {"max_new_tokens": TOKENS, **kw}
        plain = list(generate(ov_backend, ids, SamplingParams(**kw)))
        fast = list(generate(ov_backend, ids, SamplingParams(**kw), speculate=spec))
        assert [type(e) for e in fast] == [type(e) for e in plain]
        assert [getattr(e, "text") for e in fast] == [getattr(e, "text") for e in plain], kw
        assert fast[-1].token_ids == plain[-1].token_ids and len(fast[-1].token_ids) <= kw["max_new_tokens"]


def test_sdpa_graph_refuses_speculation(smollm2_path):
    from chatlab.backends import load_backend

    sdpa = load_backend(backend="openvino", precision="f32", attention="sdpa")
    ids = task_prompts(sdpa.tokenizer, "story", 1)[0]
    with pytest.raises(ChatlabError, match="roll its KV cache back.*sdpa.*paged"):
        list(generate(sdpa, ids, SamplingParams(max_new_tokens=4), speculate=Speculation()))


def test_dynamic_quantization_is_refused_with_the_fix_named(smollm2_path):
    """With the plugin's activation quantization on, a verify pass disagrees with a step (the
    logits differ by up to ~1 on int8 weights), so greedy output would drift: refused."""
    from chatlab.backends import load_backend

    quantized = load_backend(backend="openvino", precision="f32", dynamic_quantization=True)
    if quantized.exact_extend:
        pytest.skip("this CPU's plugin does not quantize activations even when asked")
    ids = task_prompts(quantized.tokenizer, "story", 1)[0]
    with pytest.raises(ChatlabError, match="dynamic_quantization=False"):
        list(generate(quantized, ids, SamplingParams(max_new_tokens=4), speculate=Speculation()))


def test_chat_engine_with_speculation_and_prefix_reuse_answers_as_plain(ov_backend):
    """The server's path: a client resending a growing conversation. With speculation and prefix
    reuse on, each turn prefills only its new tokens, and the replies are the plain engine's."""
    from chatlab.backends import load_backend
    from chatlab.lab.bench.turns import timed_turn, user_turns
    from chatlab.engine import ChatEngine

    fast = ChatEngine(ov_backend, "smollm2-135m-instruct", speculate=Speculation(), reuse_prefix=True)
    plain = ChatEngine(load_backend(backend="openvino", precision="f32", dynamic_quantization=False),
                       "smollm2-135m-instruct")
    h_fast: list[dict] = []
    h_plain: list[dict] = []
    for turn, message in enumerate(user_turns(3)):
        h_fast.append({"role": "user", "content": message})
        h_plain.append({"role": "user", "content": message})
        _, a, prompt_tokens = timed_turn(fast, h_fast, 24)
        _, b, _ = timed_turn(plain, h_plain, 24)
        assert a == b, turn
        if turn:  # everything up to the new message came from the cache
            assert fast.prefix.reused > prompt_tokens // 2
        else:
            assert fast.prefix.reused == 0
        h_fast.append({"role": "assistant", "content": a})
        h_plain.append({"role": "assistant", "content": b})


def test_chat_widget_reuses_the_previous_turn(ov_backend):
    from chatlab.lab.widgets import ChatWidget

    widget = ChatWidget(ov_backend, "smollm2-135m-instruct", reuse_prefix=True)
    widget.max_tokens.value, widget.temperature.value = 12, 0.0
    widget.send("Name a colour.", echo=False)
    assert widget.engine.prefix.reused == 0
    widget.send("Name another one.", echo=False)
    assert widget.engine.prefix.reused > 20  # the system prompt, turn 1 and its reply came from the cache


@pytest.mark.parametrize("backend_name", ["ov_backend", "torch_backend"])
def test_extend_rows_equal_steps_and_truncate_rolls_back(backend_name, request):
    import numpy as np

    b = request.getfixturevalue(backend_name)
    ids = task_prompts(b.tokenizer, "story", 1)[0]
    b.prefill(ids)
    steps = [b.step(t).copy() for t in (11, 12, 13)]
    b.prefill(ids)
    rows = b.extend([11, 12, 13], keep=3).copy()
    assert b.length == len(ids) + 3
    assert np.abs(rows - np.stack(steps)).max() < 1e-3
    b.truncate(len(ids) + 1)  # keep 11, drop 12 and 13: then feed another continuation
    again = b.extend([14, 15], keep=2).copy()
    b.prefill(ids + [11])
    assert np.abs(again - b.extend([14, 15], keep=2)).max() < 1e-3
    with pytest.raises(ValueError):
        b.truncate(b.length + 1)
