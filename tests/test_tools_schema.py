"""Tool definitions and tool_choice are parsed once (chatlab.types): user errors are clear
ChatlabErrors; a call's arguments are then checked against the tool's schema."""
from __future__ import annotations

import pytest

from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.tools import validate_arguments
from chatlab.types import ToolChoice, parse_tool_choice, parse_tools

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"},
                                     "unit": {"type": "string", "enum": ["c", "f"]},
                                     "days": {"type": "integer"}},
    "required": ["location"], "additionalProperties": False}}}
TOOLS = parse_tools([WEATHER])


def test_tools_must_be_a_list():
    with pytest.raises(ChatlabError, match="tools must be a list"):
        parse_tools({"name": "get_weather"})


def test_tool_without_name():
    with pytest.raises(ChatlabError, match=r"tools\[1\] has no name"):
        parse_tools([WEATHER, {"type": "function", "function": {"parameters": {}}}])


@pytest.mark.parametrize("params", [{"type": "objekt"}, {"type": "object", "properties": []},
                                    {"type": "object", "required": "location"}])
def test_invalid_parameter_schema(params):
    bad = {"type": "function", "function": {"name": "f", "parameters": params}}
    with pytest.raises(ChatlabError, match=r"tools\[1\]\.function\.parameters is not a valid JSON schema") as err:
        parse_tools([WEATHER, bad])
    assert err.value.param == "tools[1].function.parameters"  # the full path, as data


def test_valid_tools_and_legacy_functions():
    tools = parse_tools([WEATHER], functions=[{"name": "legacy", "parameters": {"type": "object"}}])
    assert [t.name for t in tools] == ["get_weather", "legacy"]


@pytest.mark.parametrize("choice, expected", [
    (None, ToolChoice("auto")), ("none", ToolChoice("none")), ("required", ToolChoice("required")),
    ({"type": "function", "function": {"name": "get_weather"}}, ToolChoice("named", "get_weather")),
    ({"name": "get_weather"}, ToolChoice("named", "get_weather")),        # legacy function_call
    ("get_weather", ToolChoice("named", "get_weather")),                  # the CLI's NAME
])
def test_tool_choice_forms(choice, expected):
    assert parse_tool_choice(choice, TOOLS) == expected


def test_tool_choice_naming_an_unknown_tool():
    with pytest.raises(UnknownNameError, match="unknown tool_choice 'get_time'.*get_weather"):
        parse_tool_choice({"type": "function", "function": {"name": "get_time"}}, TOOLS)


def test_required_without_tools_is_accepted_but_a_name_is_not():
    assert parse_tool_choice("required", []) == ToolChoice("required")
    with pytest.raises(ChatlabError):
        parse_tool_choice("get_weather", [])


def test_tool_choice_of_a_strange_shape():
    with pytest.raises(ChatlabError, match="not understood"):
        parse_tool_choice(42, TOOLS)


def test_arguments_against_the_schema():
    assert validate_arguments('{"location": "Paris", "unit": "c", "days": 2}', TOOLS, "get_weather") == []
    problems = validate_arguments('{"unit": "k", "days": true, "x": 1}', TOOLS, "get_weather")
    text = " ".join(problems)
    assert "'location'" in text and "'k'" in text and "True" in text and "x" in text
    assert len(problems) == 4
    assert validate_arguments("{oops", TOOLS, "get_weather")[0].startswith("arguments are not valid JSON")
    assert validate_arguments("{}", TOOLS, "nope") == ["unknown tool 'nope'"]
