"""/openapi.json and the request parser come from one definition: every field the parser takes
is in the document with the parser's type and limits (generate/limits.py, chatlab.types),
and nothing else is. No model: the engine is scripted."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from chatlab._thirdparty import Jsonable
from chatlab.engine.request import ChatRequest, CompletionRequest, SamplingFields, parse_request
from chatlab.errors import ChatlabError
from chatlab.generate import limits
import chatlab.types as wire

RANGES = {"temperature": limits.TEMPERATURE, "top_p": limits.TOP_P, "top_k": limits.TOP_K,
          "repetition_penalty": limits.REPETITION_PENALTY, "presence_penalty": limits.PRESENCE_PENALTY,
          "frequency_penalty": limits.FREQUENCY_PENALTY, "max_tokens": limits.MAX_NEW_TOKENS,
          "max_completion_tokens": limits.MAX_NEW_TOKENS}
BASE: dict[type[SamplingFields], dict[str, Jsonable]] = {
    ChatRequest: {"messages": [{"role": "user", "content": "hi"}]}, CompletionRequest: {"prompt": "hi"}}
WRONG = {"number": "0.5", "integer": 1.5, "boolean": "true", "string": 3}  # a value of another type


@pytest.fixture(scope="module")
def doc() -> dict[str, Jsonable]:
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for
    from chatlab.serve.app import create_app

    engine = ChatEngine(ScriptedBackend(tokenizer_for(get_template("qwen2.5")), ["Hi."]), "m", template="qwen2.5")
    return TestClient(create_app(engine)).get("/openapi.json").json()


def accepted(cls: type[SamplingFields]) -> set[str]:
    """The body fields the parser takes (pydantic ignores every other key)."""
    return {name for name, f in cls.model_fields.items() if not f.exclude}


def refused_param(cls: type[SamplingFields], body: dict[str, Jsonable]) -> str | None:
    with pytest.raises(ChatlabError) as err:
        parse_request(body, cls)
    return err.value.param


def scalar(prop: dict[str, Jsonable]) -> dict[str, Jsonable]:
    """The non-null branch of an optional field's schema."""
    options = prop.get("anyOf", [prop])
    assert isinstance(options, list)
    (only,) = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
    return only


@pytest.mark.parametrize("cls", [ChatRequest, CompletionRequest])
def test_the_document_lists_exactly_the_fields_the_parser_takes(doc: dict, cls: type[SamplingFields]) -> None:
    props = doc["components"]["schemas"][cls.__name__]["properties"]
    assert set(props) == accepted(cls)
    # a key outside the model is ignored (clients send extras such as `metadata`), never taken
    assert "metadata" not in props and not hasattr(parse_request({**BASE[cls], "metadata": {}}, cls), "metadata")


@pytest.mark.parametrize("cls", [ChatRequest, CompletionRequest])
def test_each_bounded_field_has_the_limits_the_parser_enforces(doc: dict, cls: type[SamplingFields]) -> None:
    props = doc["components"]["schemas"][cls.__name__]["properties"]
    for name, rng in RANGES.items():
        s = scalar(props[name])
        low_key = "exclusiveMinimum" if rng.low_open else "minimum"
        assert s[low_key] == rng.low and s.get("maximum") == rng.high, (name, s)
        assert refused_param(cls, {**BASE[cls], name: rng.low - 1}) == name
        if rng.high is not None:
            assert refused_param(cls, {**BASE[cls], name: rng.high + 1}) == name
            parse_request({**BASE[cls], name: rng.high}, cls)  # the bound itself is taken


@pytest.mark.parametrize("cls", [ChatRequest, CompletionRequest])
def test_each_scalar_field_has_the_type_the_parser_takes(doc: dict, cls: type[SamplingFields]) -> None:
    props = doc["components"]["schemas"][cls.__name__]["properties"]
    checked = 0
    for name, prop in props.items():
        try:
            kind = scalar(prop).get("type")
        except ValueError:  # a union of shapes (stop, prompt, the chat fields): checked below
            continue
        if kind in WRONG:
            assert refused_param(cls, {**BASE[cls], name: WRONG[kind]}) == name, (name, kind)
            checked += 1
    assert checked >= 10


def test_the_chat_fields_schema_is_the_parsers_wire_shape(doc: dict) -> None:
    props = doc["components"]["schemas"]["ChatRequest"]["properties"]
    messages = props["messages"]
    assert messages["minItems"] == 1 and refused_param(ChatRequest, {"messages": []}) == "messages"
    roles = messages["items"]["properties"]["role"]["enum"]
    assert tuple(roles) == wire.ROLES
    for role in roles:  # every documented role is taken (a tool result needs its call id)
        msg = {"role": role, "content": "x", "tool_call_id": "c1", "name": "f"}
        parse_request({"messages": [{"role": "user", "content": "q"}, msg]})
    assert refused_param(ChatRequest, {"messages": [{"role": "robot", "content": "x"}]}) == "messages[0].role"
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object"}}}
             for i in range(wire.MAX_TOOLS + 1)]
    assert props["tools"]["maxItems"] == wire.MAX_TOOLS
    parse_request({**BASE[ChatRequest], "tools": tools[:-1]})
    assert refused_param(ChatRequest, {**BASE[ChatRequest], "tools": tools}) == "tools"
    name_rule = props["tools"]["items"]["properties"]["function"]["properties"]["name"]["pattern"]
    bad = {"type": "function", "function": {"name": "no spaces"}}
    assert name_rule == wire.NAME_RE.pattern and refused_param(ChatRequest, {**BASE[ChatRequest], "tools": [bad]})
    stops = [o for o in props["stop"]["anyOf"] if o.get("type") == "array"][0]
    assert stops["maxItems"] == wire.MAX_STOPS and stops["items"]["maxLength"] == wire.MAX_STOP_CHARS
    assert refused_param(ChatRequest, {**BASE[ChatRequest], "stop": ["s"] * (wire.MAX_STOPS + 1)}) == "stop"
    kinds = props["response_format"]["properties"]["type"]["enum"]
    for kind in kinds:
        fmt: dict[str, Jsonable] = {"type": kind}
        if kind == "json_schema":
            fmt["json_schema"] = {"name": "x", "schema": {"type": "object"}}
        parse_request({**BASE[ChatRequest], "response_format": fmt})
    assert props["functions"]["deprecated"] and props["function_call"]["deprecated"]


@pytest.mark.parametrize("field, value, param", [
    ("messages", [{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content[0]"),
    ("messages", [{"role": "assistant", "tool_calls": [{"function": {"name": "a b"}}]}],
     "messages[0].tool_calls[0].function.name"),
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
     "tools[0].function.parameters"),
    ("tools", "f", "tools"),
])
def test_the_request_and_the_parse_functions_refuse_with_one_model(field: str, value: Jsonable, param: str) -> None:
    """A chat field is refused by the same wire model, with the same words and `param`, whether
    it comes in a request body or through chatlab.types' parse functions."""
    parse = {"messages": wire.parse_messages, "tools": wire.parse_tools}[field]
    with pytest.raises(ChatlabError) as direct:
        parse(value)
    with pytest.raises(ChatlabError) as body:
        parse_request({**BASE[ChatRequest], field: value})
    assert (str(body.value), body.value.param) == (str(direct.value), direct.value.param)
    assert direct.value.param == param and str(direct.value).startswith(param)


def test_sampling_params_from_a_request_are_not_range_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request model holds the sampling ranges, so the SamplingParams it makes are not
    checked against them again; SamplingParams made directly are (the one check for Python)."""
    from chatlab.generate import SamplingParams

    calls: list[float] = []
    holds = limits.Range.holds
    monkeypatch.setattr(limits.Range, "holds", lambda self, v: (calls.append(v), holds(self, v))[1])
    req = parse_request({**BASE[ChatRequest], "temperature": 0.5, "top_p": 0.9, "frequency_penalty": 1})
    params = req.to_sampling_params([], [], prompt_len=10, context_length=100, vocab_size=50)
    assert (params.temperature, params.top_p, params.frequency_penalty, calls) == (0.5, 0.9, 1, [])
    with pytest.raises(ChatlabError, match="temperature"):
        SamplingParams(temperature=2.5)
    assert calls


@pytest.mark.parametrize("body, param", [
    ({"logit_bias": {"x": 1}}, "logit_bias"),
    ({"logit_bias": {"1": 101}}, "logit_bias"),
    ({"top_logprobs": 2}, "top_logprobs"),
])
def test_what_sampling_params_refused_is_refused_by_the_request(body: dict[str, Jsonable], param: str) -> None:
    assert refused_param(ChatRequest, {**BASE[ChatRequest], **body}) == param
