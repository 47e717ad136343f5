"""Incremental detokenization never emits a broken character and loses nothing."""
from __future__ import annotations

import pytest

from chatlab.generate.assemble import IncrementalDetokenizer

TEXTS = [
    "café 🌊 naïve — 日本語のテキスト, emoji 👩‍👩‍👧 done.",
    "  leading spaces\n\ttabs and  double  spaces ",
    "plain ASCII words that never split",
]


def stream(tokenizer, ids: list[int]) -> list[str]:
    d = IncrementalDetokenizer(tokenizer)
    return [d.add(i) for i in ids] + [d.flush()]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("tok_fixture", ["smollm2_tokenizer", "qwen3_tokenizer"])
def test_stream_equals_full_decode_and_never_has_replacement_chars(text, tok_fixture, request):
    tok = request.getfixturevalue(tok_fixture)
    ids = tok.encode(text, add_special_tokens=False)
    deltas = stream(tok, ids)
    assert "".join(deltas) == tok.decode(ids) == text
    assert not any("\ufffd" in d for d in deltas)


def test_a_character_split_across_tokens_waits_for_its_last_byte(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("🌊", add_special_tokens=False)
    # The premise: the emoji is several byte tokens, and decoding them one by one breaks it.
    assert len(ids) > 1 and "\ufffd" in tok.decode(ids[:1])
    deltas = stream(tok, ids)
    assert deltas[:-2] == [""] * (len(ids) - 1) and deltas[len(ids) - 1] == "🌊"


def test_flush_emits_an_incomplete_tail(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("ok 🌊", add_special_tokens=False)
    d = IncrementalDetokenizer(tok)
    shown = "".join(d.add(i) for i in ids[:-1])  # the emoji's last byte never arrives
    assert shown == "ok"
    assert d.flush() == tok.decode(ids[:-1])[len("ok"):]  # " " plus the replacement char


def test_special_tokens_are_skipped(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("hi", add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    assert "".join(stream(tok, ids)) == "hi"


def test_a_token_without_its_leading_space_joins_the_word_before_as_the_full_decode_does(smollm2_tokenizer):
    tok = smollm2_tokenizer
    spaced, bare = tok.convert_tokens_to_ids("Ġonly"), tok.convert_tokens_to_ids("only")
    before = tok.encode(" not", add_special_tokens=False)
    assert spaced != bare and tok.convert_ids_to_tokens(before) == ["Ġnot"]
    # a sampled 'only' (no Ġ) after 'not' is the model's choice: the stream shows it as decoded
    assert "".join(stream(tok, before + [bare])) == tok.decode(before + [bare]) == " notonly"
    assert "".join(stream(tok, before + [spaced])) == " not only"
