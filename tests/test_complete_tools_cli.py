"""`chatlab complete` with tools: --tools, --tool-choice, --response-format, in JSON and streamed.

Runs the real CLI in process (`chatlab.cli.main`) on SmolLM2-135M, greedy. A forced call is
guaranteed by the grammar, not by the model's skill; what these tests pin down is the wire shape
the CLI prints (OpenAI's chat.completion / chat.completion.chunk), and that bad files and bad
names stop with exit 2 and a sentence saying what to fix — never a traceback.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatlab.tools import validate_instance

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = [WEATHER, CLOCK]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
DOG = {"type": "object", "properties": {"name": {"type": "string"}, "color": {"type": "string"}},
       "required": ["name", "color"], "additionalProperties": False}
# Forced calls from SmolLM2 spell `<tool_call>` in small pieces: leave room for ~200 tokens.
GREEDY = ["--temperature", "0", "--max-tokens", "200"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("complete_tools")
    content = {
        "ask": [{"role": "user", "content": "What is the weather in Paris right now?"}],
        "dog": [{"role": "user", "content": "John had a dog named Harry, who was a brown beagle "
                                            "that loved chicken. Extract the dog as JSON."}],
        "tools": TOOLS,
        "dog_format": {"type": "json_schema", "json_schema": {"name": "Dog", "strict": True, "schema": DOG}},
        "tools_dict": {"get_weather": WEATHER["function"]},
        "tools_nameless": [{"type": "function", "function": {"description": "no name"}}],
        "tools_bad_schema": [{"type": "function", "function": {
            "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "strng"}}}}}],
        "format_no_schema": {"type": "json_schema", "json_schema": {"name": "Dog"}},
    }
    paths = {}
    for name, value in content.items():
        paths[name] = root / f"{name}.json"
        paths[name].write_text(json.dumps(value))
    paths["not_json"] = root / "not_json.json"
    paths["not_json"].write_text("[{'type': 'function'}")
    paths["missing"] = root / "missing.json"
    return paths


def complete(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    from chatlab.cli import main

    capsys.readouterr()  # drop anything printed before this call
    # These tests pin the wire shape, not a backend: PyTorch, whose greedy tokens they were
    # written against (the default backend is OpenVINO int8; test_engine covers it).
    rc = main(["complete", "--backend", "torch", *map(str, args)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def tool_deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool_calls entry from the streamed deltas, in order."""
    return [call for c in chunks for choice in c["choices"]
            for call in choice["delta"].get("tool_calls") or []]


def check_call_stream(chunks: list[dict[str, Any]]) -> tuple[str, str]:
    """Assert OpenAI's streamed tool-call shape (reference §4); return (name, arguments)."""
    assert chunks and all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    first, *rest = tool_deltas(chunks)
    # the first delta names the call once: index, id, type, name, and empty arguments
    assert set(first) == {"index", "id", "type", "function"}
    assert first["index"] == 0 and first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"]["arguments"] == "" and first["function"]["name"] in SCHEMAS
    # later deltas carry only the index and argument fragments (a repeated name gets concatenated)
    assert rest, "the arguments should arrive as fragments after the first delta"
    for delta in rest:
        assert set(delta) == {"index", "function"} and set(delta["function"]) == {"arguments"}
        assert delta["index"] == 0
    # the last choice chunk: empty delta + finish_reason; then the usage chunk with no choices
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] is not None]
    assert len(finals) == 1 and finals[0]["choices"][0] == {**finals[0]["choices"][0], "delta": {},
                                                            "finish_reason": "tool_calls"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "", "a forced call leaves no content around it"
    return first["function"]["name"], "".join(d["function"]["arguments"] for d in rest)


def test_named_tool_choice_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # get_time for a weather question: the name comes from --tool-choice, not the model's guess
    rc, out, err = complete(capsys, "--messages", files["ask"], "--tools", files["tools"],
                            "--tool-choice", "get_time", "--json", *GREEDY)
    assert rc == 0, err
    answer = json.loads(out)
    assert answer["object"] == "chat.completion"
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["role"] == "assistant" and msg["content"] is None
    [call] = msg["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_time"
    assert validate_instance(json.loads(call["function"]["arguments"]), SCHEMAS["get_time"]) == []
    assert answer["usage"]["completion_tokens"] <= 200


def test_named_tool_choice_stream_matches_json(files: dict[str, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--messages", files["ask"], "--tools", files["tools"], "--tool-choice", "get_weather", *GREEDY]
    rc, out, err = complete(capsys, *args, "--json")
    assert rc == 0, err
    whole = json.loads(out)["choices"][0]["message"]["tool_calls"][0]["function"]
    rc, out, err = complete(capsys, *args, "--stream", "--json")
    assert rc == 0, err
    name, arguments = check_call_stream([json.loads(line) for line in out.splitlines()])
    # greedy: the fragments add up to exactly the non-streamed call
    assert (name, arguments) == (whole["name"], whole["arguments"]) and name == "get_weather"
    assert validate_instance(json.loads(arguments), SCHEMAS["get_weather"]) == []


def test_required_tool_choice_stream(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = complete(capsys, "--messages", files["ask"], "--tools", files["tools"],
                            "--tool-choice", "required", "--stream", "--json", *GREEDY)
    assert rc == 0, err
    name, arguments = check_call_stream([json.loads(line) for line in out.splitlines()])
    # required: the model picks the tool, the grammar makes it one of the given ones, valid
    assert validate_instance(json.loads(arguments), SCHEMAS[name]) == []


def test_plain_output_names_the_call(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = complete(capsys, "--messages", files["ask"], "--tools", files["tools"],
                            "--tool-choice", "get_time", *GREEDY)
    assert rc == 0, err
    [line] = [x for x in out.splitlines() if x.startswith("tool call: ")]
    name, _, rest = line[len("tool call: "):].partition("(")
    assert name == "get_time" and rest.endswith(")")
    assert validate_instance(json.loads(rest[:-1]), SCHEMAS["get_time"]) == []


def test_response_format_json_schema(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--messages", files["dog"], "--response-format", files["dog_format"], *GREEDY]
    rc, out, err = complete(capsys, *args, "--json")
    assert rc == 0, err
    choice = json.loads(out)["choices"][0]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    content = choice["message"]["content"]
    assert validate_instance(json.loads(content), DOG) == []
    rc, out, err = complete(capsys, *args, "--stream", "--json")
    assert rc == 0, err
    chunks = [json.loads(line) for line in out.splitlines()]
    assert tool_deltas(chunks) == []
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert streamed == content


def test_tool_choice_none_renders_no_tools(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    prompt_tokens = []
    for extra in ([], ["--tools", files["tools"], "--tool-choice", "none"],
                  ["--tools", files["tools"], "--tool-choice", "auto"]):
        rc, out, err = complete(capsys, "--messages", files["ask"], *extra,
                                "--temperature", "0", "--max-tokens", "1", "--json")
        assert rc == 0, err
        answer = json.loads(out)
        assert "tool_calls" not in answer["choices"][0]["message"]
        prompt_tokens.append(answer["usage"]["prompt_tokens"])
    # none: the request is answered as if no tools were sent; auto: the tools are in the prompt
    assert prompt_tokens[0] == prompt_tokens[1] < prompt_tokens[2]


@pytest.mark.parametrize("args,needles", [
    (["--tools", "tools_dict"], ["list", "tools_dict.json"]),
    (["--tools", "tools_nameless"], ["tools[0]", "name"]),
    (["--tools", "tools_bad_schema"], ["not a valid JSON schema", "strng"]),
    (["--tools", "not_json"], ["not valid JSON", "not_json.json"]),
    (["--tools", "missing"], ["cannot read", "missing.json"]),
    (["--tools", "tools", "--tool-choice", "get_news"], ["get_news", "get_weather", "get_time", "required"]),
    (["--tool-choice", "get_weather"], ["get_weather", "auto, none, required"]),
    (["--response-format", "format_no_schema"], ["json_schema.schema"]),
    (["--response-format", "not_json"], ["not valid JSON", "not_json.json"]),
], ids=["tools-not-a-list", "tool-without-name", "invalid-schema", "tools-not-json", "tools-missing",
        "unknown-tool-choice", "tool-choice-without-tools", "schema-missing", "format-not-json"])
def test_bad_input_exits_2_with_a_clear_message(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                args: list[str], needles: list[str]) -> None:
    argv = [files[a] if a in files else a for a in args]
    rc, out, err = complete(capsys, "--messages", files["ask"], *argv, "--max-tokens", "1")
    assert rc == 2 and out == ""
    assert "chatlab complete: error: " in err and "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_history_calls_survive_tool_choice_none(smollm2_tokenizer: Any) -> None:
    """Feeding a result back with tool_choice "none" (or without tools): SmolLM2's own template
    ignores tools, and would drop the earlier call and its result from the prompt."""
    from chatlab.engine import parse_request
    from types import SimpleNamespace

    from chatlab.engine.bound import TokenBound
    from chatlab.engine.plan import plan_chat
    from chatlab.render import resolve

    res = resolve(smollm2_tokenizer, "smollm2-135m-instruct")
    engine = SimpleNamespace(resolution=res, tokenizer=smollm2_tokenizer, vocab_size=49152,
                             context_length=8192, token_bound=TokenBound(None, None))
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}
    history = [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and cloudy"}]
    for extra in ({}, {"tools": TOOLS, "tool_choice": "none"}):
        plan = plan_chat(engine, parse_request({"messages": history, **extra}))
        text = plan.rendered.text
        assert '"name": "get_weather"' in text and '"city": "Paris"' in text
        assert "18 degrees and cloudy" in text
        assert plan.tools == () and plan.tool_format is None and not plan.constrained
