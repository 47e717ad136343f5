"""What the engine and the server produce matches chatlab.types.responses' TypedDicts at run
time, nested shapes included: every required key is there, no key is outside the type, every
value has the declared type. mypy checks the code that builds them; this checks the dicts."""
from __future__ import annotations

import json
import types
from typing import Any, Iterator, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import httpx
import pytest

from chatlab.engine import ChatEngine, CompletionRequest, parse_request
from chatlab.errors import ChatlabError
from chatlab.lab.evals.controls import ScriptedBackend
from chatlab.serve import start_server
from chatlab.types import responses
from fake_engine import FakeEngine

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def mismatches(value: Any, hint: Any, where: str = "$") -> list[str]:
    """Where `value` departs from the type `hint` (empty when it matches)."""
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a {hint.__name__} dict"]
        fields = get_type_hints(hint)
        out = [f"{where}: missing {key!r} ({hint.__name__})" for key in sorted(hint.__required_keys__ - set(value))]
        out += [f"{where}: {key!r} is not in {hint.__name__}" for key in sorted(set(value) - set(fields))]
        for key in sorted(set(value) & set(fields)):
            out += mismatches(value[key], fields[key], f"{where}.{key}")
        return out
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        tries = [mismatches(value, arm, where) for arm in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [m for i, item in enumerate(value) for m in mismatches(item, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [m for k, item in value.items() for m in
                mismatches(k, args[0], f"{where} key") + mismatches(item, args[1], f"{where}[{k!r}]")]
    if hint is None or hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    allowed = (int, float) if hint is float else (hint,)
    ok = isinstance(value, allowed) and not isinstance(value, bool)
    return [] if ok else [f"{where}: {value!r} is not a {hint.__name__}"]


def assert_matches(value: Any, hint: Any) -> None:
    assert mismatches(value, hint) == [], json.dumps(value)[:2000]


def engine(replies: list[str]) -> ChatEngine:
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    return ChatEngine(ScriptedBackend(tokenizer_for(get_template("qwen2.5")), replies), "scripted",
                      template="qwen2.5")


def chat_both_ways(replies: list[str], **body: Any) -> None:
    eng = engine(replies * 2)
    whole = eng.chat(eng.check(parse_request({"messages": ASK, "temperature": 0, **body})))
    assert_matches(whole, responses.ChatCompletion)
    stream = {"messages": ASK, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    chunks = list(eng.chat_stream(eng.check(parse_request({**stream, **body}))))
    assert len(chunks) > 2
    for chunk in chunks:
        assert_matches(chunk, responses.ChatCompletionChunk)


@pytest.mark.parametrize("body", [
    {},
    {"logprobs": True, "top_logprobs": 2},
    {"tools": WEATHER},
    {"functions": [WEATHER[0]["function"]], "function_call": {"name": "get_weather"}},
], ids=["text", "logprobs", "tool_call", "legacy_function_call"])
def test_chat_and_its_chunks_match_their_types(body: dict[str, Any]) -> None:
    chat_both_ways([CALL if ("tools" in body or "functions" in body) else "Paris is lovely."], **body)


@pytest.mark.parametrize("extra", [{"logprobs": 2}, {"echo": True}], ids=["logprobs", "echo"])
def test_text_completion_and_its_chunks_match_their_types(extra: dict[str, Any]) -> None:
    eng = engine(["Paris is lovely."] * 2)
    plan = eng.check(parse_request({"prompt": "The capital of France:", "temperature": 0, "stream": True,
                                    "stream_options": {"include_usage": True}, **extra}, CompletionRequest))
    chunks = list(eng.completion_stream(plan))
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    for chunk in chunks:
        assert_matches(chunk, responses.TextCompletionChunk)
    assert_matches(eng.completion(plan), responses.TextCompletion)


class FailsMidStream(FakeEngine):
    def chat_stream(self, plan: Any, should_stop: Any = None) -> Iterator[responses.ChatCompletionChunk]:
        yield from list(super().chat_stream(plan, should_stop))[:1]
        raise ChatlabError("the reply broke off", param="messages")


def test_error_bodies_match_their_type() -> None:
    with start_server(FailsMidStream(["one"])) as srv:
        bad = httpx.post(srv.url + "/chat/completions", json={"messages": "not a list"})
        assert bad.status_code == 400
        assert_matches(bad.json(), responses.ErrorBody)
        # mid-stream: the error event after a chunk has gone out
        events = httpx.post(srv.url + "/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "stream": True}).text
    data = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: {")]
    assert data[-1]["error"]["message"] == "the reply broke off" and "choices" in data[0]
    assert_matches(data[-1], responses.ErrorBody)


def test_the_check_sees_a_shape_that_drifted() -> None:
    """Not vacuous: a missing key, an extra key and a wrong nested value are each reported."""
    eng = engine(["Paris"])
    whole = eng.chat(eng.check(parse_request({"messages": ASK, "temperature": 0})))
    assert_matches(whole, responses.ChatCompletion)
    missing = {k: v for k, v in whole.items() if k != "usage"}
    assert mismatches(missing, responses.ChatCompletion) == ["$: missing 'usage' (ChatCompletion)"]
    assert mismatches({**whole, "extra": 1}, responses.ChatCompletion) == ["$: 'extra' is not in ChatCompletion"]
    wrong = json.loads(json.dumps(whole))
    wrong["choices"][0]["message"]["role"] = "user"
    assert mismatches(wrong, responses.ChatCompletion) == [
        "$.choices[0].message.role: 'user' is not one of ('assistant',)"]
    wrong["choices"][0]["message"]["role"] = "assistant"
    wrong["usage"]["total_tokens"] = "3"
    assert mismatches(wrong, responses.ChatCompletion)[0].startswith("$.usage.total_tokens")
