"""One named regression test per wire-format variant seen from real models, per format."""
from __future__ import annotations

import json
import re

import pytest

from chatlab.errors import UnknownNameError
from chatlab.tools import parse_tool_calls
from chatlab.types import parse_tools

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}
TIME = {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}
TOOLS = parse_tools([WEATHER, TIME])


def calls(result):
    return [(c.name, json.loads(c.arguments)) for c in result.tool_calls]


# -- Hermes / Qwen2.5 / Qwen3 ------------------------------------------------------------------
def test_hermes_qwen25_single_call():
    r = parse_tool_calls("hermes", '<tool_call>\n{"name": "get_weather", "arguments": '
                         '{"location": "Paris"}}\n</tool_call>', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Paris"})] and r.content is None and r.error is None
    assert re.fullmatch(r"call_[0-9a-f]{24}", r.tool_calls[0].id)


def test_hermes_parallel_calls_get_distinct_ids():
    one = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "%s"}}\n</tool_call>'
    r = parse_tool_calls("hermes", one % "Paris" + "\n" + one % "Rome", TOOLS)
    assert calls(r) == [("get_weather", {"location": "Paris"}), ("get_weather", {"location": "Rome"})]
    assert r.content is None and len({c.id for c in r.tool_calls}) == 2


def test_hermes_text_before_call_is_content():
    r = parse_tool_calls("hermes", 'Let me check.\n\n<tool_call>\n{"name": "current_time", '
                         '"arguments": {}}\n</tool_call>', TOOLS)
    assert r.content == "Let me check." and calls(r) == [("current_time", {})]


def test_hermes_qwen3_think_block_then_call():
    r = parse_tool_calls("hermes", '<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n'
                         '{"name": "get_weather", "arguments": {"location": "Oslo"}}\n</tool_call>', TOOLS)
    assert r.content == "<think>\nThe user wants weather.\n</think>"
    assert calls(r) == [("get_weather", {"location": "Oslo"})]


def test_hermes_small_model_bare_json():
    r = parse_tool_calls("hermes", '{"name": "get_weather", "arguments": {"location": "Paris"}}', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Paris"})] and r.content is None


def test_hermes_missing_close_tag_before_eos():
    r = parse_tool_calls("hermes", '<tool_call>\n{"name": "get_weather", "arguments": '
                         '{"location": "Paris"}}\n', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Paris"})] and r.error is None


def test_hermes_stringified_arguments():
    r = parse_tool_calls("hermes", '<tool_call>\n{"name": "get_weather", "arguments": '
                         '"{\\"location\\": \\"Paris\\"}"}\n</tool_call>', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Paris"})]


def test_hermes_parameters_key_and_arguments_before_name():
    r = parse_tool_calls("hermes", '<tool_call>{"parameters": {"location": "Rome"}, '
                         '"name": "get_weather"}</tool_call>', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Rome"})]


def test_hermes_close_tag_inside_a_string_argument():
    r = parse_tool_calls("hermes", '<tool_call>{"name": "get_weather", "arguments": '
                         '{"location": "</tool_call>"}}</tool_call>', TOOLS)
    assert calls(r) == [("get_weather", {"location": "</tool_call>"})]


def test_hermes_json_answer_without_call_shape_is_content():
    r = parse_tool_calls("hermes", '{"name": "Harry", "color": "brown"}', TOOLS)
    assert r.content == '{"name": "Harry", "color": "brown"}' and r.tool_calls == [] and r.error is None


@pytest.mark.parametrize("text, why", [
    ('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Par', "unterminated"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris",}}\n</tool_call>',
     "not valid JSON"),
    ('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', "unknown tool 'get_time'"),
    ("<tool_call>\n{'name': 'get_weather'}\n</tool_call>", "member name"),
    ('<tool_call>\n{"name": "get_weather", "arguments": [1]}\n</tool_call>', "must be a JSON object"),
    ('<tool_call>\n{"\\q": 1}\n</tool_call>', "Invalid \\escape"),  # in a member name: no exception
    ('<tool_call>\n{"a\nb\\n": 1}\n</tool_call>', "Invalid control character"),
])
def test_hermes_malformed_output_comes_back_as_content(text, why):
    r = parse_tool_calls("hermes", text, TOOLS)
    assert r.tool_calls == [] and r.content == text and why in r.error


def test_hermes_one_bad_call_does_not_spoil_a_good_one():
    good = '<tool_call>\n{"name": "current_time", "arguments": {}}\n</tool_call>'
    bad = '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>'
    r = parse_tool_calls("hermes", good + "\n" + bad, TOOLS)
    assert calls(r) == [("current_time", {})] and r.content == bad and "nope" in r.error


# -- llama3 JSON style ----------------------------------------------------------------------
def test_json_llama3_parameters_object():
    r = parse_tool_calls("json", '{"name": "get_weather", "parameters": {"location": "Lima"}}', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Lima"})] and r.content is None


def test_json_llama3_python_tag_and_semicolon_separated_calls():
    r = parse_tool_calls("json", '<|python_tag|>{"name": "get_weather", "parameters": {"location": '
                         '"A"}}; {"name": "current_time", "parameters": {}}', TOOLS)
    assert calls(r) == [("get_weather", {"location": "A"}), ("current_time", {})]


def test_json_plain_answer_is_content():
    r = parse_tool_calls("json", "It is 20 degrees in Lima.", TOOLS)
    assert r.content == "It is 20 degrees in Lima." and r.tool_calls == [] and r.error is None


# -- Qwen-1 ReAct -----------------------------------------------------------------------------
def test_react_qwen1_thought_action_input():
    r = parse_tool_calls("react", 'Thought: I need to look up the weather.\nAction: get_weather\n'
                         'Action Input: {"location": "Beijing"}\n', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Beijing"})]
    assert r.content == "I need to look up the weather."


def test_react_final_answer_is_the_content():
    r = parse_tool_calls("react", "Thought: I now know the final answer\nFinal Answer: It is sunny.", TOOLS)
    assert r.content == "It is sunny." and r.tool_calls == []


def test_react_stop_word_not_removed_and_observation_hallucinated():
    r = parse_tool_calls("react", 'Thought: x\nAction: get_weather\nAction Input: {"location": "Rome"}\n'
                         'Observation: {"temp": 99}\nThought: done', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Rome"})]


def test_react_uses_the_last_action():
    r = parse_tool_calls("react", 'Thought: x\nAction: current_time\nAction: get_weather\n'
                         'Action Input: {"location": "Rome"}', TOOLS)
    assert calls(r) == [("get_weather", {"location": "Rome"})]


def test_react_action_without_thought():
    r = parse_tool_calls("react", 'Action: current_time\nAction Input: {}', TOOLS)
    assert calls(r) == [("current_time", {})] and r.content is None


@pytest.mark.parametrize("text, why", [
    ("Thought: x\nAction: get_weather\n", "without `Action Input:`"),
    ('Thought: x\nAction: weather\nAction Input: {"location": "Rome"}', "unknown tool 'weather'"),
    ("Thought: x\nAction: get_weather\nAction Input: Rome", "not a JSON object"),
])
def test_react_malformed_output_comes_back_as_content(text, why):
    r = parse_tool_calls("react", text, TOOLS)
    assert r.tool_calls == [] and r.content == text and why in r.error


# -- ChatGLM3 -------------------------------------------------------------------------------
def test_chatglm3_fenced_tool_call():
    r = parse_tool_calls("chatglm3", 'get_weather\n```python\ntool_call(location="北京")\n```', TOOLS)
    assert calls(r) == [("get_weather", {"location": "北京"})] and r.content is None


def test_chatglm3_name_need_not_start_with_get():
    r = parse_tool_calls("chatglm3", "current_time\n```python\ntool_call()\n```", TOOLS)
    assert calls(r) == [("current_time", {})]


def test_chatglm3_unfenced_call_and_python_literals():
    tools = parse_tools(functions=[{"name": "track", "parameters": {"type": "object"}}])  # legacy shape
    r = parse_tool_calls("chatglm3", "track\ntool_call(symbol='10111', all=True, limit=None)", tools)
    assert calls(r) == [("track", {"symbol": "10111", "all": True, "limit": None})]


def test_chatglm3_normal_reply_starts_with_newline():
    r = parse_tool_calls("chatglm3", "\nHello! How can I help?", TOOLS)
    assert r.content == "Hello! How can I help?" and r.tool_calls == []


def test_chatglm3_first_word_that_is_no_tool_is_content():
    r = parse_tool_calls("chatglm3", "Sure\nhere is a poem", TOOLS)
    assert r.content == "Sure\nhere is a poem" and r.error is None


def test_chatglm3_never_runs_model_code(tmp_path):
    target = tmp_path / "pwned"
    text = f'get_weather\n```python\ntool_call(location=open({str(target)!r}, "w").write("x"))\n```'
    r = parse_tool_calls("chatglm3", text, TOOLS)
    assert not target.exists() and r.tool_calls == [] and "not a plain literal" in r.error


@pytest.mark.parametrize("text, why", [
    ('get_wether\n```python\ntool_call(location="x")\n```', "unknown tool 'get_wether'"),
    ('get_weather\n```python\ntool_call(location="x"', "never closed"),
    ("get_weather\n```python\nimport os\n```", "not a Python call expression"),
    ("get_weather\n```python\nrun(location='x')\n```", "must be tool_call"),
])
def test_chatglm3_malformed_output_comes_back_as_content(text, why):
    r = parse_tool_calls("chatglm3", text, TOOLS)
    assert r.tool_calls == [] and r.content == text and why in r.error


def test_unknown_format_names_the_choices():
    with pytest.raises(UnknownNameError, match="hermes"):
        parse_tool_calls("xml", "", TOOLS)
