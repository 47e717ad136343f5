"""The live bites' measuring code, on scripted replies (fast) and on the model (slow).

Scripted replies go through the real loop and tokenizer, so what is counted (a right answer,
a run to max_tokens, an invented user turn, wasted tokens, leaked markup, a reply that goes on
past its answer, a lost call) is checked on replies whose answer we know."""
from __future__ import annotations

import pytest

from chatlab.engine import ChatEngine
from chatlab.lab.evals import load_facts, load_weather_requests
from chatlab.lab.evals.bites import (VERDICTS, Column, missing_stop_bite, split_marker_ids, split_markers_bite, table,
                                     template_ids, verdict)
from chatlab.lab.evals.controls import ScriptedBackend
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
    # one script per column; the model's own end id (its generation_config) is <|im_end|>
    script = [runs_on + "<|endoftext|>", "I do not know.<|im_end|><|endoftext|>"]
    backend = ScriptedBackend(tok, script * 3, eos_id=2)
    broken, fixed, control = missing_stop_bite(backend, resolve(tok, MODEL), facts, max_tokens=64)
    first = broken.replies[0]
    assert first.correct and first.answer == "Paris." and first.invented_turn
    assert first.wasted == first.tokens - 3 > 10                 # 'Paris', '.', '<|im_end|>' then the rest
    assert not broken.replies[1].correct and not broken.replies[1].invented_turn
    assert fixed.replies[0].wasted == 0 and fixed.replies[0].tokens == 3   # stopped at <|im_end|>
    text = table([broken, fixed], [("answer right", "correct"), ("invented a user turn", "invented_turn"),
                                   ("tokens after <|im_end|>", "wasted")], 64)
    assert "1/2" in text.splitlines()[1] and str(broken.wasted) in text.splitlines()[3]
    assert broken.wasted == first.wasted + 1   # the second reply: only the <|endoftext|> after its end
    assert [r.text for r in control.replies] == [r.text for r in fixed.replies]   # the control stops alike
    assert control.label == "stop: generation_config's <|im_end|>"


def test_a_reply_cut_by_max_tokens_counts_as_run_to_the_limit(tok) -> None:
    backend = ScriptedBackend(tok, ["Paris " * 30])
    split, _, _ = split_markers_bite(backend, resolve(tok, MODEL), load_facts()[:1], max_tokens=8)
    assert split.count("length") == 1 and split.replies[0].tokens == 8
    assert split.count("never ends") == 1 and split.replies[0].verdict == "never ends"


@pytest.mark.parametrize("shown, finish, seen", [
    ("The capital of France is Paris.", "stop", "ends"),
    ("The capital of France is Paris.\n\n", "stop", "ends"),             # trailing blank lines are nothing
    ("The capital of France is Paris.\nThe answer is: Paris", "stop", "goes on"),
    ("A spider has 8 legs.\n\nExplanation: spiders are arachnids.", "stop", "goes on"),
    ("Paris.\n<|im_start|>user\nAnd Spain?", "stop", "new turn"),
    ("There are 7 days.\n\nYou are a helpful AI assistant named SmolLM", "length", "new turn"),
    ("Paris Paris Paris Paris", "length", "never ends"),
    ("The sky is blue.\nThe sky is blue.\nThe sky is", "length", "never ends"),
])
def test_the_verdict_names_what_the_reply_shows(shown: str, finish: str, seen: str) -> None:
    assert verdict(shown, finish) == seen


def test_a_verdict_needs_a_known_finish_reason() -> None:
    with pytest.raises(ValueError, match="finish_reason"):
        verdict("Paris.", "eos")


def test_split_markers_bite_counts_each_column_by_what_its_replies_show(tok) -> None:
    facts = load_facts()[:4]   # Paris, Tokyo, Rome, Berlin
    end = tok.convert_tokens_to_ids("<|im_end|>")
    # the split column's script: goes on, writes the next turn as text pieces (as a model that
    # saw its markers as text does), never ends, ends; then both other columns end at the answer
    turn = split_marker_ids(tok, "Rome.<|im_end|>\n<|im_start|>user\nAnd Spain?") + [end]
    split_script = ["The capital of France is Paris.\nThe answer is: Paris<|im_end|>",
                    "Tokyo.\n\nExplanation: it is in Japan.<|im_end|>", turn, "Berlin " * 40]
    fine = [f"The capital is {f.answer[0]}.<|im_end|>" for f in facts]
    backend = ScriptedBackend(tok, [*split_script, *fine, *fine])
    split, fixed, control = split_markers_bite(backend, resolve(tok, MODEL), facts, max_tokens=32)
    assert [r.verdict for r in split.replies] == ["goes on", "goes on", "new turn", "never ends"]
    assert [split.count(v) for v in VERDICTS] == [1, 1, 2, 0]   # new turn, never ends, goes on, ends
    assert fixed.count("ends") == control.count("ends") == 4
    assert all(r.correct for c in (split, fixed, control) for r in c.replies)
    text = table([split, fixed, control], [(v.replace(" ", "_"), v) for v in VERDICTS], 32)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:]}
    assert rows == {"new_turn": ["1/4", "0/4", "0/4"], "never_ends": ["1/4", "0/4", "0/4"],
                    "goes_on": ["2/4", "0/4", "0/4"], "ends": ["0/4", "4/4", "4/4"]}


def test_the_positive_control_is_the_tokenizers_own_template_with_markers_whole(tok) -> None:
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    ids = template_ids(tok, chat)
    assert ids == list(resolve(tok, MODEL).render(chat).ids)      # the reference the fix must equal
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids


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
    """The measured claims of notebooks 01-04, on fewer prompts: the split prompt's replies go on
    past their answer, write a new turn or never end, the id-level ones end at their answer, and
    the tokenizer's own template (the positive control) gives the id-level prompt and replies;
    without the stop the replies run on; the buffered parser keeps every forced call and leaks
    nothing, the naive relay loses them."""
    from chatlab.backends import load_backend

    backend = load_backend(MODEL, backend="openvino", weight_format="int8")
    res = resolve(backend.tokenizer, MODEL)
    facts = load_facts()[:8]
    split, fixed, control = split_markers_bite(backend, res, facts)
    assert split.count("ends") <= 2 and fixed.count("ends") >= 6
    assert fixed.count("goes on") == fixed.count("new turn") == 0
    assert control.prompts == fixed.prompts and [r.text for r in control.replies] == [r.text for r in fixed.replies]
    broken, stopped, control = missing_stop_bite(backend, res, facts[:4], max_tokens=48)
    assert broken.wasted > 0 and stopped.wasted == 0 and broken.tokens > stopped.tokens
    assert control.wasted == 0 and control.tokens == stopped.tokens
    engine = ChatEngine(backend, MODEL)
    naive, buffered = relay_bite(engine, load_weather_requests()[:4], "live")
    assert buffered.count("called") == 4 and buffered.count("leaked") == 0
    assert naive.count("lost") == 4
