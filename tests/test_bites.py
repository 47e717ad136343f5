"""The live bites' measuring code, on scripted replies (fast) and on the model (slow).

Scripted replies go through the real loop and tokenizer, so what is counted (a right answer,
a run to max_tokens, an invented user turn, wasted tokens, leaked markup, a lost call) is
checked on replies whose answer we know."""
from __future__ import annotations

import pytest

from chatlab.backends.scripted import ScriptedBackend
from chatlab.engine import ChatEngine
from chatlab.lab.evals import load_facts, load_weather_requests
from chatlab.lab.evals.bites import Column, missing_stop_bite, split_marker_ids, split_markers_bite, table
from chatlab.lab.evals.relay import buffered_relay, gold_reply, naive_relay, relay_bite, relay_table
from chatlab.models import load_tokenizer
from chatlab.render import resolve

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


def test_split_markers_keep_the_text_but_lose_every_control_id(tok) -> None:
    rendered = resolve(tok, MODEL).render([{"role": "user", "content": "What is the capital of France?"}])
    ids = split_marker_ids(tok, rendered.text)
    assert set(rendered.ids) & set(tok.all_special_ids)          # the id level has control ids
    assert not set(ids) & set(tok.all_special_ids)               # the split prompt has none
    assert tok.decode(ids) == rendered.text                      # ...and reads the same as text
    assert len(ids) > len(rendered.ids)


def test_missing_stop_counts_the_run_on_the_invented_turn_and_the_waste(tok) -> None:
    facts = load_facts()[:2]   # Paris, Tokyo
    runs_on = "Paris.<|im_end|>\n<|im_start|>system\n<|im_end|>\n<|im_start|>user\nAnd Germany?<|im_end|>\n<|im_start|>assistant\nBerlin."
    backend = ScriptedBackend(tok, [runs_on, "I do not know.<|im_end|>"] * 2, eos_id=0)  # one per column
    broken, fixed = missing_stop_bite(backend, resolve(tok, MODEL), facts, max_tokens=64)
    first = broken.replies[0]
    assert first.correct and first.answer == "Paris." and first.invented_turn
    assert first.wasted == first.tokens - 3 > 10                 # 'Paris', '.', '<|im_end|>' then the rest
    assert not broken.replies[1].correct and not broken.replies[1].invented_turn
    assert fixed.replies[0].wasted == 0 and fixed.replies[0].tokens == 3   # stopped at <|im_end|>
    text = table([broken, fixed], [("answer right", "correct"), ("invented a user turn", "invented_turn"),
                                   ("tokens after <|im_end|>", "wasted")], 64)
    assert "1/2" in text.splitlines()[1] and str(broken.wasted) in text.splitlines()[3]
    assert broken.wasted == first.wasted + 1   # the second reply: only the <|endoftext|> after its end


def test_a_reply_cut_by_max_tokens_counts_as_run_to_the_limit(tok) -> None:
    backend = ScriptedBackend(tok, ["Paris " * 30])
    split, _ = split_markers_bite(backend, resolve(tok, MODEL), load_facts()[:1], max_tokens=8)
    assert split.count("length") == 1 and split.replies[0].tokens == 8


def test_the_naive_relay_leaks_a_split_tag_and_the_buffered_parser_does_not() -> None:
    deltas = ["<", "tool", "_", "call", ">", "\n", '{"name": "get_current_weather", ',
              '"arguments": {"location": "Oslo", "unit": "celsius"}}', "\n</tool_call>"]
    naive, buffered = naive_relay(deltas), buffered_relay(deltas)
    assert naive.leaked() and not naive.calls
    assert not buffered.leaked() and buffered.location() == "Oslo"
    whole = naive_relay(["<tool_call>", "\n" + "".join(deltas[6:])])   # the tag as one token
    assert not whole.leaked() and whole.location() == "Oslo"


def test_the_scripted_gold_control_is_the_ceiling(tok) -> None:
    requests = load_weather_requests()
    engine = ChatEngine(ScriptedBackend(tok, [gold_reply(r) for r in requests]), MODEL)
    naive, buffered = relay_bite(engine, requests, "gold")
    n = len(requests)
    assert buffered.count("called") == n and buffered.count("location") == n and buffered.count("leaked") == 0
    assert naive.count("lost") == n and naive.count("leaked") == n   # SmolLM2 splits the tag
    assert f"{n}/{n}" in relay_table([naive, buffered])


@pytest.mark.slow
def test_live_bites_on_smollm2_bite_and_the_fixes_help() -> None:
    """The measured claims of notebooks 01-04, on fewer prompts: the split prompt's replies run
    to max_tokens more often than the id-level ones (their answers are not worse on this set:
    the notebook says so); without the stop the replies run on; the buffered parser keeps every
    forced call and leaks nothing, the naive relay loses them."""
    from chatlab.backends import load_backend

    backend = load_backend(MODEL, backend="openvino", weight_format="int8")
    res = resolve(backend.tokenizer, MODEL)
    facts = load_facts()[:8]
    split, fixed = split_markers_bite(backend, res, facts, max_tokens=32)
    assert split.count("length") > fixed.count("length")
    broken, stopped = missing_stop_bite(backend, res, facts[:4], max_tokens=48)
    assert broken.wasted > 0 and stopped.wasted == 0 and broken.tokens > stopped.tokens
    engine = ChatEngine(backend, MODEL)
    naive, buffered = relay_bite(engine, load_weather_requests()[:4], "live")
    assert buffered.count("called") == 4 and buffered.count("leaked") == 0
    assert naive.count("lost") == 4
