"""The engine on a scripted backend: streamed == non-streamed by construction, for every format.

No model is loaded: ScriptedBackend replays text through the real loop, parser and accumulator.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatlab.engine import ChatEngine, parse_request
from chatlab.errors import ChatlabError
from chatlab.engine.shapes import merge_chunks
from chatlab.engine.lease import Superseded
from chatlab.lab.evals.controls import ScriptedBackend

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]

# format -> (a built-in template that uses it, a well-formed call as the model writes it,
#            the same call broken: invalid arguments)
FORMATS = {
    "hermes": ("qwen2.5", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'),
    "react": ("qwen", 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}\n',
              'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": \n'),
    "chatglm3": ("chatglm3", 'get_weather\n```python\ntool_call(city="Paris")\n```',
                 'get_weather\n```python\ntool_call(city=\n```'),
    "json": ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}',
             '{"name": "get_weather", "parameters": {"city": }'),
}


def engine_for(fmt: str, replies: list[str]) -> ChatEngine:
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    template = FORMATS[fmt][0]
    backend = ScriptedBackend(tokenizer_for(get_template(template)), replies)
    return ChatEngine(backend, "scripted", template=template)


def normalized(answer: dict[str, Any]) -> dict[str, Any]:
    """Call ids are random per run: compare everything else."""
    out = json.loads(json.dumps({k: answer[k] for k in ("choices", "usage")}))
    for choice in out["choices"]:
        for call in choice["message"].get("tool_calls") or []:
            call["id"] = "call_x"
    return out


def both_ways(engine: ChatEngine, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list]:
    whole = engine.chat(engine.check(parse_request(body)))
    chunks = list(engine.chat_stream(engine.check(parse_request({**body, "stream": True,
                                                    "stream_options": {"include_usage": True}}))))
    return whole, merge_chunks(chunks), chunks


# format -> (a forced call as its grammar writes it, the text that completes the call's name)
FORCED = {
    "hermes": (FORMATS["hermes"][1], '"get_weather"'),
    "json": (FORMATS["json"][1], '"get_weather"'),
    "react": ('Action: get_weather\nAction Input: {"city": "Paris"}\nObservation:', "get_weather\n"),
    "chatglm3": (FORMATS["chatglm3"][1], "get_weather\n"),
}


@pytest.mark.parametrize("fmt", list(FORCED))
def test_forced_call_cut_by_length_is_a_call_once_its_name_is_complete(fmt: str) -> None:
    """A named tool_choice cut off by max_tokens after every token, temperature 0. Before the
    name is complete there is no call to return: an error naming max_tokens. From then on it is
    the call, as OpenAI returns a call cut short: finish_reason "length", no markup in content,
    the arguments as far as they got (ChatGLM3's Python call converts only whole: none until
    then), the same streamed and not."""
    reply, name_done = FORCED[fmt]
    engine = engine_for(fmt, [reply])
    ids = engine.tokenizer.encode(reply, add_special_tokens=False)
    complete = '{"city": "Paris"}'
    for max_tokens in range(1, len(ids) + 1):
        body = {"messages": ASK, "tools": WEATHER, "temperature": 0, "max_tokens": max_tokens,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        if name_done not in engine.tokenizer.decode(ids[:max_tokens]):
            with pytest.raises(ChatlabError, match=f"max_tokens={max_tokens} ended the reply") as err:
                both_ways(engine, body)
            assert err.value.param == "max_tokens"
            continue
        whole, merged, chunks = both_ways(engine, body)
        assert normalized(whole) == normalized(merged), max_tokens
        choice = whole["choices"][0]
        # all of ReAct's reply ends at its stop word: the loop stops there, no cut
        cut = max_tokens < len(ids) or fmt != "react"
        assert choice["finish_reason"] == ("length" if cut else "tool_calls")
        assert chunks[-2]["choices"][0]["finish_reason"] == choice["finish_reason"]
        assert choice["message"]["content"] is None, (max_tokens, choice)
        (call,) = choice["message"]["tool_calls"]
        arguments = call["function"]["arguments"]
        assert call["function"]["name"] == "get_weather" and complete.startswith(arguments), (max_tokens, call)
        assert fmt != "chatglm3" or arguments in ("", complete)
        assert max_tokens < len(ids) or arguments == complete


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_well_formed_call_in_every_format(fmt: str) -> None:
    engine = engine_for(fmt, [FORMATS[fmt][1]])
    whole, merged, _ = both_ways(engine, {"messages": ASK, "tools": WEATHER, "temperature": 0})
    assert normalized(whole) == normalized(merged)
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert choice["message"]["refusal"] is None and choice["message"]["role"] == "assistant"


SEGMENTS = st.one_of(
    st.text(alphabet="abc xyz.,!?\n", min_size=1, max_size=12),
    st.sampled_from(["good", "bad", "Sure, ", "END"]),
)


@settings(max_examples=int(os.environ.get("CHATLAB_EXAMPLES", 25)), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(fmt=st.sampled_from(list(FORMATS)), parts=st.lists(SEGMENTS, min_size=1, max_size=4),
       max_tokens=st.integers(min_value=1, max_value=60), stop=st.sampled_from([None, "END", "xy"]))
def test_stream_merge_equals_non_stream(fmt: str, parts: list[str], max_tokens: int,
                                        stop: str | None) -> None:
    """Plain text, one or several calls, malformed calls, calls cut by the length limit, stop
    strings across chunk borders: the non-streamed answer is the merged stream, every time."""
    _, good, bad = FORMATS[fmt]
    reply = "".join(good if p == "good" else bad if p == "bad" else p for p in parts)
    engine = engine_for(fmt, [reply])
    body = {"messages": ASK, "tools": WEATHER, "temperature": 0, "max_tokens": max_tokens}
    if stop:
        body["stop"] = [stop]
    whole, merged, chunks = both_ways(engine, body)
    assert normalized(whole) == normalized(merged)
    choice = whole["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    assert choice["finish_reason"] in ("stop", "length", "tool_calls")
    if choice["finish_reason"] == "tool_calls":
        assert calls
    if choice["finish_reason"] == "length":
        assert whole["usage"]["completion_tokens"] == max_tokens
    # an announced call never leaves its markup in the content (a call the format does not
    # accept where it stands, like a second bare JSON object after text, stays text)
    complete = [c for c in calls if _is_json(c["function"]["arguments"])]
    assert (choice["message"]["content"] or "").count(good) <= reply.count(good) - len(complete)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_plain_text_and_usage_without_tools() -> None:
    engine = engine_for("hermes", ["Paris is the capital of France."])
    whole, merged, chunks = both_ways(engine, {"messages": ASK, "temperature": 0})
    assert whole["choices"][0]["message"]["content"] == "Paris is the capital of France."
    assert whole["choices"][0]["finish_reason"] == "stop"
    assert normalized(whole) == normalized(merged)
    assert whole["usage"]["completion_tokens"] == len(engine.backend.replies[0]) + 1  # + eos


def test_abandoned_stream_does_not_block_the_next_call() -> None:
    engine = engine_for("hermes", ["one two three four five six seven eight nine ten"])
    engine.guard.idle_s = 0.5
    solo = engine.chat(engine.check(parse_request({"messages": ASK, "temperature": 0})))
    left = engine.chat_stream(engine.check(parse_request({"messages": ASK, "temperature": 0, "stream": True})))
    next(left), next(left)  # two chunks, then the notebook moves on
    t0 = time.monotonic()
    again = engine.chat(engine.check(parse_request({"messages": ASK, "temperature": 0})))
    assert time.monotonic() - t0 < 5
    assert normalized(again) == normalized(solo)
    with pytest.raises(Superseded, match="took over the model"):
        list(left)  # resumed after the takeover: a clear error, not a corrupted cache


def test_closed_stream_releases_at_once() -> None:
    engine = engine_for("hermes", ["one two three four"])
    stream = engine.chat_stream(engine.check(parse_request({"messages": ASK, "temperature": 0, "stream": True})))
    next(stream), next(stream)
    stream.close()  # what the server does when a client leaves
    assert engine.guard.current is not None and engine.guard.current.done


def test_logprobs_one_entry_per_content_token_both_ways() -> None:
    engine = engine_for("hermes", ["Paris is lovely."])
    body = {"messages": ASK, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    whole, merged, chunks = both_ways(engine, body)
    assert normalized(whole) == normalized(merged)
    entries = whole["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == "Paris is lovely."
    assert len(entries) == whole["usage"]["completion_tokens"] - 1  # the eos is a stop: no entry
    for e in entries:  # the scripted token carries all the mass; alternatives are sorted
        assert e["logprob"] == pytest.approx(0.0, abs=1e-6)
        assert len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["token"] == e["token"]
    assert any(c["choices"] and c["choices"][0]["logprobs"] for c in chunks[1:-1])


def test_logit_bias_bans_the_scripted_token() -> None:
    engine = engine_for("hermes", ["Paris"])
    first = engine.backend.replies[0][0]
    plain = engine.chat(engine.check(parse_request({"messages": ASK, "temperature": 0})))
    banned = engine.chat(engine.check(parse_request({"messages": ASK, "temperature": 0,
                                        "logit_bias": {str(first): -100}})))
    assert plain["choices"][0]["message"]["content"] == "Paris"
    assert banned["choices"][0]["message"]["content"] != "Paris"


@pytest.mark.parametrize("body, needle", [
    ({"logit_bias": {"999999999": 5}}, "logit_bias"),
    ({"logit_bias": {"5": 101}}, "logit_bias"),
])
def test_bad_logit_bias_is_refused_before_generation(body: dict[str, Any], needle: str) -> None:
    from chatlab.errors import ChatlabError

    engine = engine_for("hermes", ["Paris"])
    with pytest.raises(ChatlabError, match=needle):
        engine.check(parse_request({"messages": ASK, **body}))
    assert engine.backend.calls == 0  # refused before the model ran


def test_completion_logprobs_and_merge() -> None:
    from chatlab.engine import CompletionRequest
    from chatlab.engine.shapes import merge_text_chunks

    engine = engine_for("hermes", ["Paris is lovely."])
    plan = engine.check(parse_request({"prompt": "The capital of France:", "temperature": 0,
                                       "logprobs": 2}, CompletionRequest))
    whole = engine.completion(plan)
    streamed = merge_text_chunks(list(engine.completion_stream(plan)))
    assert whole["choices"] == streamed["choices"]
    lp = whole["choices"][0]["logprobs"]
    assert "".join(lp["tokens"]) == whole["choices"][0]["text"] == "Paris is lovely."
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])


def test_complete_cli_parses_the_request_once(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`chatlab complete` parses the body once (messages and tools included, before the model
    loads: a bad tool fails without loading anything) and the engine re-parses nothing."""
    from chatlab.cli import main
    from chatlab.engine import engine as chat_engine
    from chatlab.types import Message

    counts = {"messages": 0, "loads": 0}
    real = Message.__init__

    def counting(self: Message, *args: Any, **kwargs: Any) -> None:  # every parse builds each Message
        counts["messages"] += 1
        real(self, *args, **kwargs)

    def fake_load(**_: Any) -> ChatEngine:
        counts["loads"] += 1
        return engine_for("hermes", ["It is sunny."])

    monkeypatch.setattr(Message, "__init__", counting)
    monkeypatch.setattr(chat_engine, "load_engine", fake_load)
    msgs, tools = tmp_path / "m.json", tmp_path / "t.json"
    msgs.write_text(json.dumps(ASK))
    tools.write_text(json.dumps(WEATHER))
    assert main(["complete", "--messages", str(msgs), "--tools", str(tools), "--max-tokens", "8"]) == 0
    assert "It is sunny." in capsys.readouterr().out and counts == {"messages": 1, "loads": 1}
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "bad name!"}}]))
    assert main(["complete", "--messages", str(msgs), "--tools", str(tools)]) == 2
    assert "tools[0].function.name" in capsys.readouterr().err and counts["loads"] == 1
