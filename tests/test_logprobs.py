"""logit_bias, logprobs and top_logprobs, computed by the loop from its own logits.

Most tests run the real loop over a tiny deterministic fake backend (no model): a byte-level
vocabulary of 32 tokens whose next-token logits depend only on the last token, and which records
every row it hands out so that the reported logprobs can be checked against a log_softmax
computed independently (torch, float64).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from chatlab.errors import ChatlabError
from chatlab.generate import (Finished, SamplingParams, TextDelta, TokenLogprob, TopLogprob,
                              chat_logprobs, completion_logprobs, generate)
from chatlab.generate.logprobs import TokenTexts, top_ids

EOS = 0
VOCAB: list[bytes] = [b"<eos>", *[bytes([c]) + b" " for c in b"abcdefghijklmnopqrstuvw"],
                      b"\nObs", b"ervation:", b"\n", b"x", b"\xf0\x9f", b"\x98\x80", b"y\nz"]
OBS, ERV, NL, X, EMOJI_A, EMOJI_B, STRADDLE = 24, 25, 26, 27, 28, 29, 30
V = len(VOCAB)


class FakeTokenizer:
    """Byte-level decoding over VOCAB; id 0 is the special end token."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        ids = [i for i in ids if not (skip_special_tokens and i == EOS)]
        return b"".join(VOCAB[i] for i in ids).decode("utf-8", errors="replace")


class FakeBackend:
    """Logits depend on the last token only (a seeded table), or follow a script when given one:
    at step n the scripted token leads by a wide margin. Every returned row is recorded."""

    name, context_length, vocab_size, eos_ids = "fake", 512, V, [EOS]

    def __init__(self, script: list[int] | None = None, seed: int = 0, read_only: bool = False) -> None:
        rng = np.random.default_rng(seed)
        self.table = (rng.normal(size=(V, V)) * 3).astype(np.float32)
        self.table[:, EOS] -= 6  # keep replies from ending at once
        self.script, self.read_only = script, read_only
        self.tokenizer = FakeTokenizer()
        self.rows: list[np.ndarray] = []

    def _row(self, last: int) -> np.ndarray:
        n = len(self.rows)
        row = self.table[last].copy()
        if self.script is not None:
            row = self.table[n % V].copy()
            row[self.script[n] if n < len(self.script) else EOS] += 40
        self.rows.append(row.copy())
        row.flags.writeable = not self.read_only
        return row

    def prefill(self, ids: list[int]) -> np.ndarray:
        self.rows = []
        return self._row(ids[-1])

    def step(self, token_id: int) -> np.ndarray:
        return self._row(token_id)


def run(backend: FakeBackend, **kw) -> tuple[list[TextDelta], Finished]:
    *deltas, fin = list(generate(backend, [1, 2, 3], SamplingParams(**kw)))
    assert isinstance(fin, Finished) and all(isinstance(d, TextDelta) for d in deltas)
    return deltas, fin


def all_entries(deltas: list[TextDelta], fin: Finished) -> list[TokenLogprob]:
    return [e for d in deltas for e in (d.logprobs or [])] + (fin.logprobs or [])


def log_softmax(row: np.ndarray) -> np.ndarray:
    return torch.log_softmax(torch.from_numpy(row.astype(np.float64)), dim=-1).numpy()


# -- logit_bias ------------------------------------------------------------------------------
def test_bias_minus_100_bans_the_greedy_choice():
    _, plain = run(FakeBackend(), max_new_tokens=12)
    first = plain.token_ids[0]
    for key in (first, str(first)):  # JSON object keys arrive as strings
        _, banned = run(FakeBackend(), max_new_tokens=12, logit_bias={key: -100})
        assert banned.token_ids[0] != first and first not in banned.token_ids


def test_bias_plus_100_forces_a_token_greedy_never_picks():
    _, plain = run(FakeBackend(), max_new_tokens=8)
    forced = next(t for t in range(1, V) if t not in plain.token_ids)
    for read_only in (False, True):  # a backend's row may be read-only: the bias copies it
        _, fin = run(FakeBackend(read_only=read_only), max_new_tokens=8, logit_bias={forced: 100})
        assert fin.token_ids == [forced] * 8


# -- logprobs: one entry per token, the right numbers -------------------------------------------
@pytest.mark.parametrize("kw", [
    {},                                                   # greedy
    {"temperature": 0.8, "top_p": 0.9, "seed": 3},        # sampled: logprobs ignore T and top-p
    {"repetition_penalty": 1.5},                          # ... and the penalty
    {"logit_bias": {5: -7.5, 9: 4.0}},                    # the bias is part of the distribution
])
def test_logprobs_match_an_independent_log_softmax(kw):
    backend = FakeBackend()
    deltas, fin = run(backend, max_new_tokens=15, logprobs=True, top_logprobs=4, **kw)
    entries = all_entries(deltas, fin)
    assert [e.token_id for e in entries] == fin.token_ids  # exactly one entry per token
    bias = np.zeros(V)
    for t, b in kw.get("logit_bias", {}).items():
        bias[t] = b
    for entry, row in zip(entries, backend.rows):
        expected = log_softmax(row + bias)
        assert math.isclose(entry.logprob, expected[entry.token_id], abs_tol=1e-5)
        assert len(entry.top) == 4 and all(isinstance(t, TopLogprob) for t in entry.top)
        assert [t.token_id for t in entry.top] == np.argsort(-expected, kind="stable")[:4].tolist()
        assert np.allclose([t.logprob for t in entry.top], np.sort(expected)[::-1][:4], atol=1e-5)
        assert all(a.logprob >= b.logprob for a, b in zip(entry.top, entry.top[1:]))
        raw = VOCAB[entry.token_id]
        if raw.isascii():
            assert entry.text == raw.decode() and bytes(entry.bytes) == raw
        if "temperature" not in kw and "repetition_penalty" not in kw:
            # greedy: the chosen token is the argmax of the reported distribution
            assert entry.token_id == entry.top[0].token_id and entry.logprob == entry.top[0].logprob


def test_logprobs_off_costs_nothing_and_carries_nothing():
    deltas, fin = run(FakeBackend(), max_new_tokens=6)
    assert fin.logprobs is None and all(d.logprobs is None for d in deltas)
    deltas, fin = run(FakeBackend(), max_new_tokens=6, logprobs=True)  # top_logprobs=0
    assert all(e.top == [] for e in all_entries(deltas, fin)) and len(all_entries(deltas, fin)) == 6


def test_each_delta_carries_the_tokens_of_its_text():
    # "a " "\nObs" "x" "ervation:" ... : "\nObs" is held back as a possible stop string, then
    # released together with "x"; the split emoji waits for its second byte.
    script = [1, OBS, X, EMOJI_A, EMOJI_B, 2, EOS]
    deltas, fin = run(FakeBackend(script), max_new_tokens=20, stop=["\nObservation:"],
                      logprobs=True, top_logprobs=2)
    for d in deltas:
        assert [e.token_id for e in d.logprobs] == d.token_ids
    assert [d.text for d in deltas] == ["a ", "\nObsx", "\U0001F600", "b "]
    assert [d.token_ids for d in deltas] == [[1], [OBS, X], [EMOJI_A, EMOJI_B], [2]]
    assert [e.token_id for e in fin.logprobs] == [EOS]  # the stop id: not part of the reply
    assert [e.text_offset for e in all_entries(deltas, fin)] == [0, 2, 6, 7, 7, 8, 10]
    assert fin.text == "a \nObsx\U0001F600b "


def test_tokens_of_a_removed_stop_string_go_to_finished():
    script = [1, 2, OBS, ERV, 3]
    deltas, fin = run(FakeBackend(script), max_new_tokens=20, stop=["\nObservation:"], logprobs=True)
    assert fin.finish_reason == "stop" and fin.text == "a b "
    assert [e.token_id for d in deltas for e in d.logprobs] == [1, 2]
    assert [e.token_id for e in fin.logprobs] == [OBS, ERV]
    assert [e.token_id for e in all_entries(deltas, fin)] == fin.token_ids


def test_a_token_is_content_when_its_text_starts_before_the_stop_string():
    # stop "\n": "y\nz" shows "y" before the stop, so it is content; "\nObs" starts at the stop
    deltas, fin = run(FakeBackend([X, STRADDLE]), max_new_tokens=20, stop=["\n"], logprobs=True)
    assert fin.text == "xy" and [e.token_id for d in deltas for e in d.logprobs] == [X, STRADDLE]
    assert fin.logprobs == []
    deltas, fin = run(FakeBackend([X, OBS, 1]), max_new_tokens=20, stop=["\n"], logprobs=True)
    assert fin.text == "x" and [e.token_id for d in deltas for e in d.logprobs] == [X]
    assert [e.token_id for e in fin.logprobs] == [OBS]


class AllowOnly:
    """A logits processor like the grammar's: every token outside `allowed` gets -inf."""

    def __init__(self, allowed: list[int]) -> None:
        self.allowed = allowed

    def mask(self, logits: np.ndarray) -> np.ndarray:
        out = np.full_like(logits, -np.inf)
        out[self.allowed] = logits[self.allowed]
        return out

    def accept(self, token_id: int) -> None:
        pass


def test_logprobs_are_taken_after_the_grammar_mask():
    backend = FakeBackend()
    allowed = [3, 7, 11]
    events = list(generate(backend, [1], SamplingParams(max_new_tokens=5, logprobs=True, top_logprobs=5),
                           AllowOnly(allowed)))
    *deltas, fin = events
    for entry, row in zip(all_entries(deltas, fin), backend.rows):
        expected = log_softmax(row[allowed])  # renormalized over the allowed tokens only
        assert math.isclose(entry.logprob, expected[allowed.index(entry.token_id)], abs_tol=1e-5)
        assert {t.token_id for t in entry.top[:3]} == set(allowed)
        assert all(t.logprob == -math.inf for t in entry.top[3:])


def test_top_ids_equals_a_full_sort():
    """The group-maxima shortcut finds exactly the n best ids, ties broken by lower id, also on
    rows full of ties and on masked rows that are mostly -inf."""
    rng = np.random.default_rng(1)
    for trial in range(200):
        size, n = int(rng.integers(1, 70000)), int(rng.integers(0, 21))
        row = (rng.normal(size=size) * 3).astype(np.float32)
        if trial % 3 == 0:
            row = np.round(row)
        if trial % 5 == 0:
            row[rng.random(size) < 0.995] = -np.inf
        assert top_ids(row, n).tolist() == np.lexsort((np.arange(size), -row))[:n].tolist()


# -- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, needle", [
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs=21"),
    ({"logprobs": True, "top_logprobs": -1}, "0 to 20"),
    ({"top_logprobs": 3}, "needs logprobs=true"),
    ({"logprobs": "yes"}, "true or false"),
    ({"logit_bias": {"abc": 1}}, "token ids"),
    ({"logit_bias": {-1: 1}}, "token ids"),
    ({"logit_bias": {True: 1}}, "token ids"),
    ({"logit_bias": {5: 101}}, "-100"),
    ({"logit_bias": {5: float("nan")}}, "-100"),
    ({"logit_bias": {5: 1, "5": 2}}, "twice"),
    ({"logit_bias": [5]}, "object mapping token ids"),
])
def test_bad_values_are_refused_with_the_fix(kwargs, needle):
    with pytest.raises(ChatlabError, match="logit_bias|logprobs|top_logprobs") as err:
        SamplingParams(**kwargs)
    assert needle in str(err.value)


def test_bias_ids_are_checked_against_the_vocabulary():
    SamplingParams(logit_bias={V - 1: 5}).validate(vocab_size=V)
    with pytest.raises(ChatlabError, match=rf"0\.\.{V - 1}"):
        SamplingParams(logit_bias={V: 5}).validate(vocab_size=V)
    with pytest.raises(ChatlabError, match="not a token id of this model"):
        list(generate(FakeBackend(), [1], SamplingParams(logit_bias={str(V + 3): -100})))


# -- token text and bytes ------------------------------------------------------------------------
def test_byte_level_token_bytes_rebuild_the_text(smollm2_tokenizer):
    text = "Hi 😀 café\n"
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    texts = TokenTexts(smollm2_tokenizer)
    parts = [texts(i) for i in ids]
    assert b"".join(bytes(raw) for _, raw in parts) == text.encode()
    assert any(t.startswith("bytes:\\x") for t, _ in parts)  # half an emoji is not text


def test_sentencepiece_token_bytes(tmp_path):
    import io

    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world", "the cat sat"] * 50),
                                   model_writer=buf, vocab_size=300, model_type="bpe", byte_fallback=True,
                                   normalization_rule_name="identity", character_coverage=1.0,
                                   remove_extra_whitespaces=False)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())

    class SlowTokenizer:  # the shape of ChatGLM's: sp_model plus convert_ids_to_tokens
        sp_model = sp

        def convert_ids_to_tokens(self, i: int) -> str:
            return sp.IdToPiece(i)

    ids = sp.encode(" hello é")
    raw = b"".join(bytes(TokenTexts(SlowTokenizer())(i)[1]) for i in ids)
    assert raw.decode() in (" hello é", "  hello é")  # SentencePiece adds a dummy prefix space


# -- wire shapes ---------------------------------------------------------------------------------
def entries_for_wire() -> list[TokenLogprob]:
    top = [TopLogprob(7, "Hi", -0.1, [72, 105]), TopLogprob(8, "Hey", -math.inf, [72, 101, 121])]
    return [TokenLogprob(7, "Hi", -0.1, [72, 105], top, 0),
            TokenLogprob(9, " there", -1.5, [32, 116, 104, 101, 114, 101], top[:1], 2)]


def test_chat_wire_shape_has_exactly_openais_keys():
    shape = chat_logprobs(entries_for_wire())
    assert set(shape) == {"content", "refusal"} and shape["refusal"] is None
    first = shape["content"][0]
    assert set(first) == {"token", "logprob", "bytes", "top_logprobs"}
    assert first == {"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": [
        {"token": "Hi", "logprob": -0.1, "bytes": [72, 105]},
        {"token": "Hey", "logprob": -9999.0, "bytes": [72, 101, 121]}]}  # -inf is not JSON
    json.dumps(shape, allow_nan=False)


def test_completion_wire_shape_has_exactly_openais_keys():
    shape = completion_logprobs(entries_for_wire(), offset=10)
    assert shape == {"tokens": ["Hi", " there"], "token_logprobs": [-0.1, -1.5],
                     "top_logprobs": [{"Hi": -0.1, "Hey": -9999.0}, {"Hi": -0.1, " there": -1.5}],
                     "text_offset": [10, 12]}
    json.dumps(shape, allow_nan=False)


def test_wire_shapes_from_a_real_loop_run():
    deltas, fin = run(FakeBackend([1, 2, 3]), max_new_tokens=10, logprobs=True, top_logprobs=2)
    content = [e for d in deltas for e in d.logprobs]
    legacy = completion_logprobs(content)
    assert "".join(legacy["tokens"]) == fin.text == "a b c "
    assert all(fin.text[o:].startswith(t) for o, t in zip(legacy["text_offset"], legacy["tokens"]))
    assert len(chat_logprobs(content)["content"]) == 3


# -- the real model ------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_model_greedy_tokens_have_the_maximal_logprob():
    from chatlab.backends import load_backend

    backend = load_backend("smollm2-135m-instruct", "torch", "fp32")
    tok = backend.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "Name three colours."}],
                                   tokenize=False, add_generation_prompt=True)
    ids = tok.encode(text, add_special_tokens=False)
    events = list(generate(backend, ids, SamplingParams(max_new_tokens=30, logprobs=True, top_logprobs=5)))
    *deltas, fin = events
    entries = all_entries(deltas, fin)
    assert [e.token_id for e in entries] == fin.token_ids and len(entries) > 5
    for e in entries:
        assert e.token_id == e.top[0].token_id and e.logprob == max(t.logprob for t in e.top)
        assert e.logprob <= 0 and sum(math.exp(t.logprob) for t in e.top) <= 1 + 1e-5
    content = [e for d in deltas for e in d.logprobs]
    assert b"".join(bytes(e.bytes) for e in content).decode() == fin.text


def test_a_tokenizers_kind_is_told_by_one_adapter(smollm2_tokenizer):
    from chatlab._thirdparty import piece_spelling, tokenizer_kind
    from chatlab.render.encoder import Encoder

    assert tokenizer_kind(smollm2_tokenizer) == Encoder(smollm2_tokenizer).kind == "fast"
    assert piece_spelling(smollm2_tokenizer) == TokenTexts(smollm2_tokenizer).mode == "bytelevel"
    assert piece_spelling(smollm2_tokenizer.backend_tokenizer) == "bytelevel"  # a bare `tokenizers` one

    class Unknown:
        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            return "?"

    assert tokenizer_kind(Unknown()) is None and TokenTexts(Unknown()).mode == "decode"
    with pytest.raises(ChatlabError, match="cannot render for a Unknown"):
        Encoder(Unknown())
