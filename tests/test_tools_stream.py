"""Streaming == one-shot for every chunking (hypothesis), ids, and what is held back."""
from __future__ import annotations

import json
import re

from hypothesis import given, settings, strategies as st

from chatlab.tools import (ContentDelta, ToolCallArgs, ToolCallEnd, ToolCallError, ToolCallStart,
                           fold, get_parser, parse_tool_calls)
from chatlab.types import ToolSpec

TOOLS = [ToolSpec(n, parameters={"type": "object"}) for n in ("get_weather", "search")]
NAMES = st.sampled_from(["get_weather", "search", "nope"])
NOISE = st.text(alphabet="ab <>/{}[]\"\\\n:;,_`()=Ttool_call", max_size=12)
ARGS = st.dictionaries(st.text(alphabet="xyz é\"\\", min_size=1, max_size=4),
                       st.one_of(st.integers(-99, 99), st.text(alphabet="ab }{\"\n", max_size=5),
                                 st.booleans(), st.none(), st.lists(st.integers(0, 9), max_size=2)),
                       max_size=3)
SPACE = st.sampled_from(["", " ", "\n", "\n\n"])


def _json_call(draw, args_key: str) -> str:
    obj = {"name": draw(NAMES), args_key: draw(ARGS)}
    if draw(st.booleans()):
        obj = dict(reversed(list(obj.items())))   # arguments before name
    if draw(st.integers(0, 5)) == 0:
        obj[args_key] = json.dumps(obj[args_key])  # stringified arguments
    text = json.dumps(obj, indent=draw(st.sampled_from([None, 2])), ensure_ascii=draw(st.booleans()))
    return text


@st.composite
def hermes_output(draw):
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["text", "call", "call", "bare", "junk"]))
        if kind == "text":
            parts.append(draw(NOISE))
        elif kind == "call":
            parts.append("<tool_call>" + draw(SPACE) + _json_call(draw, "arguments") + draw(SPACE)
                         + draw(st.sampled_from(["</tool_call>", "", "</tool_call>\n"])))
        elif kind == "bare":
            parts.append(_json_call(draw, draw(st.sampled_from(["arguments", "parameters"]))))
        else:
            parts.append("<tool_call>" + draw(NOISE) + draw(st.sampled_from(["</tool_call>", ""])))
    return _maybe_cut(draw, "".join(parts))


@st.composite
def json_output(draw):
    lead = draw(st.sampled_from(["", " ", "<|python_tag|>", "<|python", "\n"]))
    calls = [_json_call(draw, draw(st.sampled_from(["parameters", "arguments"])))
             for _ in range(draw(st.integers(0, 3)))]
    text = lead + draw(st.sampled_from(["; ", ";", "\n"])).join(calls) + draw(NOISE)
    return _maybe_cut(draw, text)


@st.composite
def react_output(draw):
    text = draw(st.sampled_from(["", "Thought: ", "Thought: I should look.", "Hi", "Th"]))
    for _ in range(draw(st.integers(0, 3))):
        text += draw(st.sampled_from([
            "\nAction: " + draw(NAMES) + "\nAction Input: " + json.dumps(draw(ARGS)),
            "\nAction: get_weather\nAction Input: " + json.dumps(draw(ARGS)) + draw(SPACE),
            "\nAction: " + draw(NAMES), "\nAction Input: {bad", "\nObservation: sunny",
            "\nFinal Answer:" + draw(st.sampled_from(["", " ", "  "])) + draw(NOISE),
            "\nThought: again", draw(NOISE)]))
    return _maybe_cut(draw, text)


@st.composite
def chatglm3_output(draw):
    first = draw(st.sampled_from(["", "get_weather", "search", "nope", "a word", "get_weather "]))
    args = ", ".join(f"{k}={v!r}" for k, v in draw(st.dictionaries(
        st.sampled_from(["city", "q", "n"]), st.one_of(st.integers(), st.text(max_size=4),
                                                      st.booleans(), st.none()), max_size=3)).items())
    body = draw(st.sampled_from([
        f"```python\ntool_call({args})\n```", f"tool_call({args})", "Hello!", "```python\nprint(1)\n```",
        f"```python\ntool_call({args})"]))
    return _maybe_cut(draw, first + "\n" + body + draw(NOISE))


def _maybe_cut(draw, text: str) -> str:
    if text and draw(st.integers(0, 3)) == 0:    # the output was cut off (max_tokens)
        return text[:draw(st.integers(0, len(text)))]
    return text


def _summary(result):
    return result.content, [(c.name, c.arguments) for c in result.tool_calls], result.error


def _stream(fmt: str, text: str, cuts: list[int]):
    """Feed `text` cut at `cuts`; what the parser holds is always the end of what it was fed."""
    parser, events, last = get_parser(fmt, TOOLS), [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        events += parser.feed(text[last:cut])
        last = cut
        assert text[:cut].endswith(parser.held())
    events += parser.finish()
    assert parser.held() == ""
    return events


def _check(fmt: str, text: str, data) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    events = _stream(fmt, text, cuts)
    assert _summary(fold(events)) == _summary(parse_tool_calls(fmt, text, TOOLS))
    one_char = _stream(fmt, text, list(range(len(text))))
    assert _summary(fold(one_char)) == _summary(fold(events))
    _check_event_grammar(events)


def _check_event_grammar(events) -> None:
    """Start before its args and end; indexes 0, 1, 2, ...; ids of OpenAI's shape."""
    started, closed = [], set()
    for ev in events:
        if isinstance(ev, ToolCallStart):
            assert ev.index == len(started) and re.fullmatch(r"call_[0-9a-f]{24}", ev.id)
            started.append(ev.index)
        elif isinstance(ev, (ToolCallArgs, ToolCallEnd)):
            assert ev.index in started and ev.index not in closed
            if isinstance(ev, ToolCallEnd):
                closed.add(ev.index)
        elif isinstance(ev, ToolCallError) and ev.index is not None:
            assert ev.index in started and ev.index not in closed
            closed.add(ev.index)
    assert set(started) == closed, "every announced call is ended or withdrawn"


@settings(max_examples=300, deadline=None)
@given(hermes_output(), st.data())
def test_hermes_streaming_equals_one_shot(text, data):
    _check("hermes", text, data)


@settings(max_examples=200, deadline=None)
@given(json_output(), st.data())
def test_json_streaming_equals_one_shot(text, data):
    _check("json", text, data)


@settings(max_examples=300, deadline=None)
@given(react_output(), st.data())
def test_react_streaming_equals_one_shot(text, data):
    _check("react", text, data)


@settings(max_examples=200, deadline=None)
@given(chatglm3_output(), st.data())
def test_chatglm3_streaming_equals_one_shot(text, data):
    _check("chatglm3", text, data)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["hermes", "json", "react", "chatglm3"]),
       st.text(alphabet="<>{}\"\\:\n ;`()=_ActionFinlAswrTughtoolc|", max_size=60), st.data())
def test_streaming_equals_one_shot_on_noise(fmt, text, data):
    _check(fmt, text, data)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abc .,!?\n\t", min_size=1, max_size=40).filter(lambda t: t[0].isalpha()),
       st.data())
def test_hermes_holds_back_only_trailing_space(text, data):
    """Text that cannot start a call is shown at once, except whitespace that might precede one."""
    parser, shown, last = get_parser("hermes", TOOLS), "", 0
    for cut in sorted(set(data.draw(st.lists(st.integers(1, len(text)), max_size=8)))) + [len(text)]:
        shown += "".join(e.text for e in parser.feed(text[last:cut]) if isinstance(e, ContentDelta))
        last = cut
        assert shown == text[:cut].rstrip(" \t\r\n")


def test_hermes_holds_exactly_a_partial_tag():
    parser = get_parser("hermes", TOOLS)
    assert parser.feed("Sure <tool") == [ContentDelta("Sure")]
    assert parser.feed("_cal") == [] and parser.held() == " <tool_cal"
    assert parser.feed("x") == [ContentDelta(" <tool_calx")] and parser.held() == ""


def test_hermes_streams_argument_fragments_before_the_call_ends():
    parser = get_parser("hermes", TOOLS)
    events = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Pa')
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgs]
    assert events[0].name == "get_weather" and events[1].fragment == '{"location": "Pa'
    assert parser.feed('ris"}}') == [ToolCallArgs(0, 'ris"}'), ToolCallEnd(0)]
    assert parser.feed("\n</tool_call>") == [] and parser.finish() == []


def test_cut_off_call_is_withdrawn_and_becomes_content():
    parser = get_parser("hermes", TOOLS)
    text = '<tool_call>\n{"name": "search", "arguments": {"q": "ca'
    events = parser.feed(text) + parser.finish()
    assert isinstance(events[0], ToolCallStart) and isinstance(events[-1], ToolCallError)
    assert events[-1].index == 0 and events[-1].text == text
    result = fold(events)
    assert result.tool_calls == [] and result.content == text and "unterminated" in result.error


def test_react_holds_back_the_thought_until_it_knows_what_follows():
    parser = get_parser("react", TOOLS)
    assert parser.feed("Thought: I need the weather.") == []
    assert parser.held() == "Thought: I need the weather."
    assert parser.feed("\nAction: get_weather\nAction Input: {}") == []
    events = parser.finish()
    assert events[0] == ContentDelta("I need the weather.")
    assert [type(e) for e in events[1:]] == [ToolCallStart, ToolCallArgs, ToolCallEnd]


def test_react_streams_plain_text_and_final_answers():
    parser = get_parser("react", TOOLS)
    assert parser.feed("Hello") == [ContentDelta("Hello")]
    assert parser.feed("\nFinal") == []
    assert parser.feed(" Answer: 4") == [ContentDelta("\n"), ContentDelta("4")]


def test_feed_after_finish_is_a_programming_error():
    parser = get_parser("json", TOOLS)
    parser.finish()
    try:
        parser.feed("x")
    except RuntimeError as e:
        assert "finish" in str(e)
    else:
        raise AssertionError("feed after finish must raise")
