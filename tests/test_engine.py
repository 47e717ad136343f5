"""The `chatlab complete` path on the real default model: render → generate → parse → shapes."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chatlab.engine import parse_request
from chatlab.errors import ChatlabError

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}]
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


def ask(engine: Any, **body: Any) -> dict[str, Any]:
    body.setdefault("messages", FRANCE)
    body.setdefault("temperature", 0)
    return engine.chat(engine.check(parse_request(body)))


def stream(engine: Any, **body: Any) -> list[dict[str, Any]]:
    body.setdefault("messages", FRANCE)
    body.setdefault("temperature", 0)
    return list(engine.chat_stream(engine.check(parse_request({**body, "stream": True}))))


def test_greedy_answer_and_usage(chat_engine: Any) -> None:
    out = ask(chat_engine, max_tokens=30)
    choice = out["choices"][0]
    assert out["object"] == "chat.completion" and choice["message"]["role"] == "assistant"
    assert "Paris" in choice["message"]["content"] and choice["finish_reason"] == "stop"
    rendered = chat_engine.render(parse_request({"messages": FRANCE}))
    assert out["usage"]["prompt_tokens"] == len(rendered["ids"]) == rendered["prompt_tokens"]
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]


def test_stream_equals_non_stream(chat_engine: Any) -> None:
    whole = ask(chat_engine, max_tokens=30)["choices"][0]
    chunks = stream(chat_engine, max_tokens=30, stream_options={"include_usage": True})
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == whole["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == whole["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_stop_string_and_length(chat_engine: Any) -> None:
    cut = ask(chat_engine, max_tokens=30, stop=["Paris"])["choices"][0]
    assert "Paris" not in cut["message"]["content"] and cut["finish_reason"] == "stop"
    short = ask(chat_engine, max_tokens=3)
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 3


def test_n_choices_with_seed_are_reproducible(chat_engine: Any) -> None:
    a = ask(chat_engine, max_tokens=12, n=2, temperature=0.9, seed=7)
    b = ask(chat_engine, max_tokens=12, n=2, temperature=0.9, seed=7)
    assert [c["index"] for c in a["choices"]] == [0, 1]
    assert [c["message"] for c in a["choices"]] == [c["message"] for c in b["choices"]]


def test_named_tool_choice_gives_a_valid_call(chat_engine: Any) -> None:
    from chatlab.tools import validate_instance

    body = dict(messages=[{"role": "user", "content": "What's the weather in Paris?"}],
                tools=WEATHER, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                max_tokens=200)
    out = ask(chat_engine, **body)["choices"][0]
    assert out["finish_reason"] == "tool_calls"
    call = out["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    args = json.loads(call["function"]["arguments"])
    assert validate_instance(args, WEATHER[0]["function"]["parameters"]) == []

    chunks = stream(chat_engine, **body)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    first, rest = deltas[0]["tool_calls"][0], [d["tool_calls"][0] for d in deltas[1:]]
    assert first["index"] == 0 and first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert rest and all(set(r) == {"index", "function"} and set(r["function"]) == {"arguments"} for r in rest)
    streamed_args = "".join(r["function"]["arguments"] for r in rest)
    assert json.loads(streamed_args) == args
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_named_call_cut_after_its_name_is_the_call(chat_engine: Any) -> None:
    """The real model, seed 5: max_tokens ending the forced call one token before its name is
    complete is an error naming max_tokens; ending it once the name is complete gives the call,
    finish_reason "length", its arguments as far as they got, the same streamed."""
    from chatlab.engine.shapes import merge_chunks

    body = dict(messages=[{"role": "user", "content": "What's the weather in Paris?"}], tools=WEATHER,
                tool_choice={"type": "function", "function": {"name": "get_weather"}}, seed=5, temperature=1)
    text, done = "", 0
    for n, ev in enumerate(chat_engine.events(chat_engine.check(parse_request({**body, "max_tokens": 64}))), 1):
        text += getattr(ev, "text", "")
        if '"get_weather"' in text:
            done = n
            break
    assert done, text
    with pytest.raises(ChatlabError, match=f"max_tokens={done - 1} ended the reply") as err:
        ask(chat_engine, **body, max_tokens=done - 1)
    assert err.value.param == "max_tokens"
    out = ask(chat_engine, **body, max_tokens=done)["choices"][0]
    assert out["finish_reason"] == "length" and out["message"]["content"] is None, out
    (call,) = out["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather" and text.endswith(call["function"]["arguments"])
    merged = merge_chunks(stream(chat_engine, **body, max_tokens=done))["choices"][0]
    assert merged["finish_reason"] == "length"
    assert [c["function"] for c in merged["message"]["tool_calls"]] == [call["function"]]


def test_legacy_functions_answer_in_legacy_shape(chat_engine: Any) -> None:
    fn = WEATHER[0]["function"]
    out = ask(chat_engine, messages=[{"role": "user", "content": "Weather in Rome?"}],
              functions=[fn], function_call={"name": "get_weather"}, max_tokens=200)["choices"][0]
    assert out["finish_reason"] == "function_call" and "tool_calls" not in out["message"]
    assert out["message"]["function_call"]["name"] == "get_weather"
    assert json.loads(out["message"]["function_call"]["arguments"])["city"]


def test_json_schema_response_format(chat_engine: Any) -> None:
    from chatlab.tools import validate_instance

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "color": {"type": "string"}},
              "required": ["name", "color"], "additionalProperties": False}
    out = ask(chat_engine, messages=[{"role": "user", "content":
              "John had a dog named Harry, who was a brown beagle. Extract the dog as JSON."}],
              response_format={"type": "json_schema", "json_schema": {"name": "Dog", "schema": schema}},
              max_tokens=200)["choices"][0]
    assert validate_instance(json.loads(out["message"]["content"]), schema) == []


@pytest.mark.parametrize("body,needle", [
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "text only"),
    ({"messages": FRANCE, "max_tokens": 100_000}, "context window"),
    ({"messages": FRANCE, "tools": WEATHER, "tool_choice": "get_time"}, "get_weather"),
    ({"messages": FRANCE, "tools": [{"type": "function", "function": {"description": "x"}}]}, "name"),
    ({"messages": FRANCE, "tools": "get_weather"}, "list"),
])
def test_bad_requests_are_clear_errors(chat_engine: Any, body: dict[str, Any], needle: str) -> None:
    with pytest.raises(ChatlabError) as err:
        chat_engine.check(parse_request(body))
    assert needle in str(err.value)


def test_complete_cli_json_and_stream(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """The default path of `chatlab complete`: OpenVINO int8 at f32 (exported on first use)."""
    from chatlab.cli import main

    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(FRANCE))
    assert main(["complete", "--messages", str(msgs), "--temperature", "0", "--max-tokens", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["object"] == "chat.completion" and "Paris" in out["choices"][0]["message"]["content"]
    assert main(["complete", "--messages", str(msgs), "--temperature", "0", "--max-tokens", "20",
                 "--stream", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert all(x["object"] == "chat.completion.chunk" for x in lines)
    assert "Paris" in "".join(c["choices"][0]["delta"].get("content") or "" for c in lines if c["choices"])


def test_complete_cli_bad_input(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from chatlab.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text("[{'role': 'user'}")
    assert main(["complete", "--messages", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    good = tmp_path / "m.json"
    good.write_text(json.dumps(FRANCE))
    assert main(["complete", "--messages", str(good), "--temperature", "-1"]) == 2
    err = capsys.readouterr().err
    assert "temperature" in err and "Traceback" not in err
    assert main(["complete", "--messages", str(good), "--backend", "tensorflow"]) == 2
    assert "torch, openvino" in capsys.readouterr().err
