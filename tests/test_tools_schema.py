"""Tool definitions and tool_choice: user errors are clear ChatlabErrors; arguments checked."""
from __future__ import annotations

import sys

import pytest

from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.tools import ToolChoice, validate_arguments, validate_tool_choice, validate_tools

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"},
                                     "unit": {"type": "string", "enum": ["c", "f"]},
                                     "days": {"type": "integer"}},
    "required": ["location"], "additionalProperties": False}}}


@pytest.fixture(params=["jsonschema", "minimal"])
def validator(request, monkeypatch):
    """Run each check with jsonschema and with the built-in fallback (jsonschema absent)."""
    if request.param == "minimal":
        monkeypatch.setitem(sys.modules, "jsonschema", None)
    return request.param


def test_tools_must_be_a_list(validator):
    with pytest.raises(ChatlabError, match="tools must be a list"):
        validate_tools({"name": "get_weather"})


def test_tool_without_name(validator):
    with pytest.raises(ChatlabError, match=r"tools\[1\] has no function name"):
        validate_tools([WEATHER, {"type": "function", "function": {"parameters": {}}}])


@pytest.mark.parametrize("params", [{"type": "objekt"}, {"type": "object", "properties": []},
                                    {"type": "object", "required": "location"}])
def test_invalid_parameter_schema(validator, params):
    bad = {"type": "function", "function": {"name": "f", "parameters": params}}
    with pytest.raises(ChatlabError, match="tool 'f' has an invalid JSON schema"):
        validate_tools([WEATHER, bad])


def test_valid_tools_and_legacy_functions(validator):
    fns = validate_tools([WEATHER, {"name": "legacy", "parameters": {"type": "object"}}])
    assert [f["name"] for f in fns] == ["get_weather", "legacy"]


@pytest.mark.parametrize("choice, expected", [
    (None, ToolChoice("auto")), ("none", ToolChoice("none")), ("required", ToolChoice("required")),
    ({"type": "function", "function": {"name": "get_weather"}}, ToolChoice("named", "get_weather")),
    ({"name": "get_weather"}, ToolChoice("named", "get_weather")),        # legacy function_call
    ("get_weather", ToolChoice("named", "get_weather")),                  # the CLI's NAME
])
def test_tool_choice_forms(choice, expected):
    assert validate_tool_choice(choice, [WEATHER]) == expected


def test_tool_choice_naming_an_unknown_tool():
    with pytest.raises(UnknownNameError, match="unknown tool_choice 'get_time'.*get_weather"):
        validate_tool_choice({"type": "function", "function": {"name": "get_time"}}, [WEATHER])


def test_required_without_tools_is_accepted_but_a_name_is_not():
    assert validate_tool_choice("required", None) == ToolChoice("required")
    with pytest.raises(ChatlabError):
        validate_tool_choice("get_weather", None)


def test_tool_choice_of_a_strange_shape():
    with pytest.raises(ChatlabError, match="not understood"):
        validate_tool_choice(42, [WEATHER])


def test_arguments_against_the_schema(validator):
    assert validate_arguments('{"location": "Paris", "unit": "c", "days": 2}', [WEATHER], "get_weather") == []
    problems = validate_arguments('{"unit": "k", "days": true, "x": 1}', [WEATHER], "get_weather")
    text = " ".join(problems)
    assert "'location'" in text and "'k'" in text and "True" in text and "x" in text
    assert len(problems) == 4
    assert validate_arguments("{oops", [WEATHER], "get_weather")[0].startswith("arguments are not valid JSON")
    assert validate_arguments("{}", [WEATHER], "nope") == ["unknown tool 'nope'"]
