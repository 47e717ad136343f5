"""Every tool format ties its renderer, its parser and its grammar together.

For each format: the call text the id-level renderer writes parses back (through the format's
own streaming parser) to the same calls; the grammar's lazy trigger is the parser's opener;
text produced by walking the forced grammar parses to a valid call; names resolve or fail.
"""
from __future__ import annotations

import json

import pytest

from chatlab.errors import UnknownNameError
from chatlab.render import TEMPLATES, resolve
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.tools import validate_arguments
from chatlab.tools import TOOL_FORMATS, ToolFormat, format_of_chat_template, get_tool_format
from chatlab.types import Message, ToolCall, parse_tools

TOOLS = parse_tools([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                                         "metric": {"type": "boolean"}},
        "required": ["city", "metric"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}}}])
WEATHER = ToolCall("c1", "get_weather", '{"city": "Paris", "metric": true}')
SEARCH = ToolCall("c2", "search", '{"query": "café \\"quoted\\"", "limit": 3}')
ALL = list(TOOL_FORMATS.values())
IDS = [f.name for f in ALL]


def _cases(fmt: ToolFormat) -> list[tuple[str, tuple[ToolCall, ...]]]:
    cases = [("", (WEATHER,)), ("", (SEARCH,))]
    if fmt.parallel_calls:
        cases.append(("", (WEATHER, SEARCH)))
    if fmt.content_with_calls:
        cases.append(("Let me check that.", (WEATHER,)))
    return cases


CASES = [(f, content, calls) for f in ALL for content, calls in _cases(f)]


def _calls(result) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in result.tool_calls]


def _template(fmt: ToolFormat):
    return next(t for t in TEMPLATES.values() if t.tool_format is fmt)


@pytest.mark.parametrize("fmt, content, calls", CASES, ids=[f"{f.name}-{i}" for i, (f, *_) in enumerate(CASES)])
def test_rendered_call_parses_back_to_the_same_calls(fmt, content, calls):
    template = _template(fmt)
    tok = tokenizer_for(template)
    res = resolve(tok, template=template.name)
    question = [Message("user", "Weather in Paris?")]
    prompt = res.render(question, tools=TOOLS).text
    rendered = res.render(question + [Message("assistant", content, calls)], tools=TOOLS,
                          add_generation_prompt=False)
    assert rendered.text.startswith(prompt)
    reply = rendered.text[len(prompt):]
    ends = [reply.find(res.encoder.special_text[i]) for i in rendered.stop_ids]
    reply = reply[:min([e for e in ends if e >= 0], default=len(reply))]  # generation stops there
    assert reply == fmt.reply_text(content, calls)
    result = fmt.parser(TOOLS).parse(reply)
    assert _calls(result) == [(c.name, json.loads(c.arguments)) for c in calls]
    assert result.content == (content or None) and result.error is None


@pytest.mark.parametrize("fmt", ALL, ids=IDS)
def test_lazy_trigger_is_the_parsers_opener(fmt):
    parser = fmt.parser(TOOLS)
    lazy = fmt.lazy_structure(TOOLS)
    if fmt.trigger is None:  # calls open the reply: nothing to wait for, nothing to trigger on
        assert parser.opener is None and lazy is None and not fmt.content_with_calls
        return
    assert fmt.trigger.strip() == parser.opener.strip()
    assert lazy["triggers"] == [fmt.trigger]
    assert all(tag["begin"].startswith(fmt.trigger) for tag in lazy["tags"])
    assert fmt.trigger in fmt.reply_text("", [WEATHER])


def _walk(tokenizer, proc, limit: int = 200) -> str:
    """Text from the forced grammar alone: at each step the lowest-id token it allows (the
    schemas here describe finite languages, so this ends)."""
    import numpy as np

    out: list[int] = []
    for _ in range(limit):
        if proc.matcher.is_completed():
            return tokenizer.decode(out)
        allowed = np.flatnonzero(np.isfinite(proc.mask(np.zeros(49152, dtype=np.float32))))
        token = int(min(t for t in allowed if t != tokenizer.eos_token_id))
        proc.accept(token)
        out.append(token)
    raise AssertionError(f"the grammar walk did not end: {tokenizer.decode(out)!r}")


@pytest.mark.parametrize("fmt", ALL, ids=IDS)
def test_forced_grammar_output_parses_to_a_valid_call(smollm2_tokenizer, fmt):
    from chatlab.tools.constrain import build_processor
    from chatlab.types import ToolChoice

    proc = build_processor(smollm2_tokenizer, 49152, tools=TOOLS, choice=ToolChoice("named", "get_weather"),
                           response_format=None, fmt=fmt)
    text = _walk(smollm2_tokenizer, proc)
    result = fmt.parser(TOOLS).parse(text)
    [call] = result.tool_calls
    assert call.name == "get_weather" and result.error is None, text
    assert validate_arguments(call.arguments, TOOLS, "get_weather") == []


@pytest.mark.parametrize("fmt", ALL, ids=IDS)
def test_forced_grammar_accepts_the_rendered_call(smollm2_tokenizer, fmt):
    from chatlab.tools.constrain import build_processor
    from chatlab.types import ToolChoice

    proc = build_processor(smollm2_tokenizer, 49152, tools=TOOLS, choice=ToolChoice("required"),
                           response_format=None, fmt=fmt)
    text = fmt.reply_text("", [WEATHER])
    text = text[text.find(fmt.trigger):] if fmt.trigger else text  # a forced call skips the Thought
    end = fmt.forced_structure([TOOLS[0]])["end"]
    assert proc.matcher.accept_string(text if text.endswith(end) else text + end)
    assert proc.matcher.is_completed()


def test_names_and_detection():
    assert set(TOOL_FORMATS) == {"hermes", "json", "react", "chatglm3"}
    assert all(get_tool_format(n) is f and get_tool_format(f) is f for n, f in TOOL_FORMATS.items())
    with pytest.raises(UnknownNameError, match="unknown tool-call format 'xml'.*hermes"):
        get_tool_format("xml")
    assert format_of_chat_template("{{ '<tool_call>' }}") is TOOL_FORMATS["hermes"]
    assert format_of_chat_template("{{ '<|observation|>' }}") is TOOL_FORMATS["chatglm3"]
    assert format_of_chat_template("{% if m.role == 'ipython' %}") is TOOL_FORMATS["json"]
    assert format_of_chat_template("{{ messages }}") is None
