"""The server against OpenAI's contract and against hostile clients — one test per probe finding.

No model: the real ChatEngine runs on ScriptedBackend (real plan, render, loop and shapes), and
a FakeEngine whose generation waits on `should_stop` times cancellation and queueing.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatlab.serve import start_server
from fake_engine import FakeEngine

SERVED = "served-model"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def engine() -> Any:
    """The real engine, scripted: every reply is 'Hello there.' unless a test scripts another."""
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    backend = ScriptedBackend(tokenizer_for(get_template("qwen2.5")), ["Hello there."])
    return ChatEngine(backend, SERVED, template="qwen2.5")


@pytest.fixture(scope="module")
def server(engine: Any) -> Iterator[Any]:
    with start_server(engine) as srv:
        yield srv


def post(srv: Any, body: Any, path: str = "/chat/completions", **kw: Any) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()  # ASCII: \ud800 escaped
    return httpx.post(srv.url + path, content=raw, headers={"content-type": "application/json"},
                      timeout=kw.pop("timeout", 30), **kw)


def error_of(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and "Traceback" not in r.text
    return err


# -- model names ----------------------------------------------------------------------------
def test_any_model_name_is_answered_by_the_served_model(server: Any) -> None:
    r = post(server, {"model": "anything-you-like", "messages": HI})
    assert r.status_code == 200 and r.json()["model"] == SERVED
    r = post(server, {"model": "gpt-4o", "prompt": "Once", "max_tokens": 3}, "/completions")
    assert r.status_code == 200 and r.json()["model"] == SERVED


def test_strict_model_name_restores_404(engine: Any) -> None:
    with start_server(engine, strict_model_name=True) as srv:
        err = error_of(post(srv, {"model": "gpt-4o", "messages": HI}), 404)
        assert err["param"] == "model" and err["code"] == "model_not_found" and SERVED in err["message"]
        assert post(srv, {"model": SERVED, "messages": HI}).status_code == 200
        assert post(srv, {"messages": HI}).status_code == 200  # no model named: the served one


def test_article_langchain_snippet_with_any_model_name(engine: Any, monkeypatch: Any) -> None:
    """The RTP-LLM article's §5.1 as written, but for the imports langchain 1.x moved."""
    engine.backend.replies = [engine.backend.tokenizer.encode(
        '<tool_call>\n{"name": "_OutputFormatter", "arguments": {"output": {"name": "Harry", '
        '"color": "brown"}}}\n</tool_call>', add_special_tokens=False)]
    engine.backend.calls = 0
    try:
        with start_server(engine) as srv:
            monkeypatch.setenv("OPENAI_API_KEY", "xxxx")  # the article's os.environ lines
            monkeypatch.setenv("OPENAI_API_BASE", srv.url)
            import warnings

            from langchain_classic.chains.openai_functions import create_structured_output_chain
            from langchain_core.prompts import ChatPromptTemplate
            from langchain_openai import ChatOpenAI
            from pydantic import BaseModel, Field

            class Dog(BaseModel):
                """Identifying information about a dog."""
                name: str = Field(..., description="The dog's name")
                color: str = Field(..., description="The dog's color")

            llm = ChatOpenAI(model="anything-you-like", temperature=0.2)
            prompt = ChatPromptTemplate.from_messages([
                ("system", "You are an algorithm for extracting information into structured formats, "
                           "and respond with function call."),
                ("user", "extract information from the following input: {input}")])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the chain and .run are deprecated, still shipped
                chain = create_structured_output_chain(Dog, llm, prompt)
                output = chain.run("John had a dog named Harry, who was a brown beagle that loved chicken")
            assert output == Dog(name="Harry", color="brown")
    finally:
        engine.backend.replies = [engine.backend.tokenizer.encode("Hello there.", add_special_tokens=False)]


# -- OpenAI's response shapes ---------------------------------------------------------------
def test_responses_validate_against_openai_types(server: Any) -> None:
    from openai.types import Completion, Model
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    whole = post(server, {"model": SERVED, "messages": HI}).json()
    ChatCompletion.model_validate(whole)
    choice = whole["choices"][0]
    # required by the spec though nullable; pydantic's Optional would not notice them missing
    assert choice["message"]["refusal"] is None and "logprobs" in choice and choice["finish_reason"]
    r = post(server, {"model": SERVED, "messages": HI, "stream": True,
                      "stream_options": {"include_usage": True}})
    events = [e[6:] for e in r.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    for event in events[:-1]:
        ChatCompletionChunk.model_validate(json.loads(event))
    Completion.model_validate(post(server, {"prompt": "Once", "max_tokens": 3}, "/completions").json())
    Model.model_validate(httpx.get(server.url + "/models").json()["data"][0])


def test_get_model_by_id(server: Any) -> None:
    from openai.types import Model

    assert Model.model_validate(httpx.get(f"{server.url}/models/{SERVED}").json()).id == SERVED


def test_get_model_follows_the_request_rule(server: Any, engine: Any) -> None:
    """A name a chat request may send (gpt-4o is answered) is also found by GET /v1/models/{id}
    (the openai client's models.retrieve), as the card of the model that answers; with
    strict_model_name both refuse it."""
    from openai import OpenAI

    client = OpenAI(base_url=server.url, api_key="unused")
    assert client.models.retrieve("gpt-4o").id == SERVED
    assert httpx.get(server.url + "/models/other/model").json()["id"] == SERVED
    with start_server(engine, strict_model_name=True) as srv:
        err = error_of(httpx.get(srv.url + "/models/gpt-4o"), 404)
        assert err["param"] == "model" and SERVED in err["message"]
        assert httpx.get(f"{srv.url}/models/{SERVED}").status_code == 200


# -- validation: 400, param set, the message names the fix -----------------------------------
@pytest.mark.parametrize("extra,param,needle", [
    ({"temperature": 5}, "temperature", "less than or equal to 2"),
    ({"n": 9}, "n", "8"),
    ({"seed": 2**63}, "seed", "64-bit"),
    ({"stop": ["x"] * 17}, "stop", "up to 16"),
    ({"stream": "maybe"}, "stream", "boolean"),
    ({"max_tokens": "lots"}, "max_tokens", "integer"),
    ({"max_tokens": 10**6}, "max_tokens", "context window"),
    ({"repetition_penalty": 1e-310}, "repetition_penalty", "0.01"),
    ({"messages": [{"role": "user"}]}, "messages[0].content", "has no content"),
    ({"messages": [{"role": "system"}, {"role": "user", "content": "x"}]}, "messages[0].content",
     "has no content"),
    ({"messages": [*HI, {"role": "tool", "tool_call_id": "", "content": "18C"}]}, "messages[1].tool_call_id",
     "non-empty string"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role", "unknown role"),
    ({"messages": []}, "messages", "non-empty"),
    ({"tools": {"name": "f"}}, "tools", "must be a list"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}]},
     "tools[0].function.parameters", "not a valid JSON schema"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "nope"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
    ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type", "only 'function'"),
    ({"presence_penalty": 3}, "presence_penalty", "less than or equal to 2"),
    ({"frequency_penalty": -2.5}, "frequency_penalty", "greater than or equal to -2"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_validation_errors_are_400_with_param(server: Any, extra: dict, param: str, needle: str) -> None:
    err = error_of(post(server, {"model": SERVED, "messages": HI, **extra}), 400)
    assert err["param"] == param and needle in err["message"], err
    assert err["type"] == "invalid_request_error"


def test_a_tool_result_without_its_call_id_is_answered(server: Any, engine: Any) -> None:
    """vLLM and LMDeploy take a tool message without tool_call_id (no template of chatlab's
    reads it), so it is rendered, not refused; an id that is there must be a string."""
    from chatlab.engine import parse_request

    msgs = [*HI, {"role": "assistant", "content": "Checking."}, {"role": "tool", "content": "18C"}]
    r = post(server, {"model": SERVED, "messages": msgs})
    assert r.status_code == 200, r.text
    plan = engine.check(parse_request({"messages": msgs}))
    assert "<tool_response>\n18C\n</tool_response>" in engine.tokenizer.decode(list(plan.prompt_ids))


def test_seed_any_int64_and_tiny_temperature_is_greedy(server: Any) -> None:
    from chatlab.engine import parse_request

    for seed in (-1, -(2**63), 2**63 - 1):
        assert post(server, {"messages": HI, "seed": seed, "temperature": 1}).status_code == 200
    assert parse_request({"messages": HI, "seed": -1}).seed == 2**64 - 1  # same bits, unsigned
    assert parse_request({"messages": HI, "temperature": 1e-310}).temperature == 0.0
    r = post(server, {"messages": HI, "temperature": 1e-310, "top_k": 50})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello there."


# -- hostile strings, sizes and depths --------------------------------------------------------
SURROGATE = "a\ud800b"
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.mark.parametrize("extra,param", [
    ({"messages": [{"role": "user", "content": SURROGATE}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": SURROGATE}]}]},
     "messages[0].content[0].text"),
    ({"stop": [SURROGATE]}, "stop[0]"),
    ({"user": SURROGATE}, "user"),
    ({"model": SURROGATE}, "model"),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": SURROGATE}}]},
     "tools[0].function.description"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "enum": [SURROGATE]}}}}}]},
     "tools[0].function.parameters.properties.x.enum[0]"),
    ({"unknown_field": {SURROGATE: 1}}, "unknown_field"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_lone_surrogate_anywhere_is_400_naming_the_field(server: Any, extra: dict, param: str) -> None:
    err = error_of(post(server, {"model": SERVED, "messages": HI, **extra}), 400)
    assert err["param"] == param and "surrogate" in err["message"], err


@pytest.mark.parametrize("extra,status,needle", [
    ({"messages": [{"role": "user", "content": "a\x00b\x1b[31m\x7f"}]}, 200, None),
    ({"model": "\x00\x01" * 10}, 200, None),
    ({"model": "m" * 100_000}, 400, "limit of 256"),
    ({"user": "u" * 100_000}, 400, "limit of 256"),
    ({"tools": [{"type": "function", "function": {"name": "f" * 100_000}}]}, 400, "1-64 characters"),
    ({"messages": [*HI, {"role": "tool", "tool_call_id": "c", "name": "n" * 100_000, "content": "x"}]},
     400, "1-64 characters"),
    ({"stop": ["s" * 5_000]}, 400, "1,000 characters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"x": json.loads('{"items":' * 40 + '{}' + '}' * 40)}}}}]}, 400, "32 levels"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema":
      json.loads('{"a":' * 100 + '1' + '}' * 100)}}}, 400, "64 levels"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {f"p{i}": {"type": "string", "description": "d" * 100} for i in range(1_000)}}}}]},
     400, "100,000"),
], ids=["control-chars", "control-model", "long-model", "long-user", "long-tool-name",
        "long-message-name", "long-stop", "deep-schema", "deep-body", "big-schema"])
def test_hostile_strings_get_200_or_4xx(server: Any, extra: dict, status: int, needle: str | None) -> None:
    r = post(server, {"model": SERVED, "messages": HI, "max_tokens": 4, **extra})
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        assert needle in error_of(r, status)["message"]


def bad_bodies() -> Iterator[bytes]:
    """200 malformed requests: broken JSON, wrong types, surrogates, huge names, deep schemas."""
    deep = '{"type":"object","properties":{"x":' * 50 + '{}' + '}}' * 50
    kinds = [
        b"{not json", b"", b"[]", b"null", b'"messages"', b"[" * 100_000, b"\xff\xfe{}",
        json.dumps({"messages": "hi"}).encode(), json.dumps({"messages": [1, 2]}).encode(),
        json.dumps({"messages": HI, "n": "many"}).encode(),
        json.dumps({"messages": HI, "temperature": "NaN"}).encode(),
        b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
        json.dumps({"messages": HI, "max_tokens": "9" * 5000}).encode(),
        b'{"messages": [{"role": "user", "content": "hi"}], "seed": ' + b"9" * 5000 + b"}",
        json.dumps({"messages": [{"role": "user", "content": "\ud800"}]}).encode(),
        json.dumps({"messages": HI, "stop": "\udfff"}).encode(),
        json.dumps({"messages": HI, "tools": [{"type": "function", "function": {"name": "x" * 100_000}}]}).encode(),
        ('{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
         '"function": {"name": "f", "parameters": ' + deep + '}}]}').encode(),
        json.dumps({"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]}).encode(),
        json.dumps({"prompt": ""}).encode(),
    ]
    for i in range(200):
        yield kinds[i % len(kinds)]


def test_burst_of_malformed_requests_all_4xx_and_connection_usable(server: Any) -> None:
    with httpx.Client(timeout=30) as client:
        for raw in bad_bodies():
            path = "/completions" if b'"prompt"' in raw else "/chat/completions"
            r = client.post(server.url + path, content=raw, headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500, (raw[:80], r.status_code, r.text[:200])
            assert r.json()["error"]["message"]
        assert client.post(server.url + "/chat/completions", json={"messages": HI}).status_code == 200


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def test_memory_returns_to_baseline_after_bursts_of_bad_requests(server: Any) -> None:
    import gc

    def burst() -> None:
        with httpx.Client(timeout=30) as client:
            for raw in bad_bodies():
                client.post(server.url + "/chat/completions", content=raw)

    burst()  # warm-up: caches, thread pool, allocator arenas
    gc.collect()
    baseline = rss_mb()
    for _ in range(3):
        burst()
    gc.collect()
    assert rss_mb() - baseline < 25, f"RSS grew from {baseline:.0f} MB to {rss_mb():.0f} MB"


# -- limits on every endpoint, checked before the queue ---------------------------------------
def test_limits_on_every_endpoint(server: Any) -> None:
    many = [{"role": "user", "content": "x"}] * 300
    for path in ("/chat/completions", "/chat/render"):
        err = error_of(post(server, {"messages": many}, path), 400)
        assert err["param"] == "messages" and "limit of 256" in err["message"]
    err = error_of(post(server, {"prompt": ["p"] * 40}, "/completions"), 400)
    assert err["param"] == "prompt" and "limit of 32" in err["message"]
    err = error_of(post(server, {"prompt": ["p"] * 5, "n": 8}, "/completions"), 400)
    assert "40 completions" in err["message"]
    for prompt in ("", [""], [], ["ok", ""]):
        assert error_of(post(server, {"prompt": prompt}, "/completions"), 400)["param"] == "prompt"
    assert error_of(post(server, {"messages": [{"role": "user", "content": "\ud800"}]}, "/chat/render"),
                    400)["param"] == "messages[0].content"


def test_bad_request_is_400_even_when_the_queue_is_full() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=5)
    with start_server(fake, max_waiting=1) as srv:
        with httpx.Client(timeout=0.3) as c:
            for _ in range(2):  # one running, one waiting: the queue is full
                with pytest.raises(httpx.TimeoutException):
                    c.post(srv.url + "/chat/completions", json={"messages": HI, "user": "a"})
        err = error_of(post(srv, {"messages": HI, "temperature": 7}), 400)
        assert err["param"] == "temperature"


def test_checks_run_off_the_event_loop() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=0, check_seconds=2.0)
    with start_server(fake) as srv:
        slow = threading.Thread(target=post, args=(srv, {"messages": HI}))
        slow.start()
        time.sleep(0.3)
        started = time.monotonic()
        assert httpx.get(srv.base + "/health", timeout=5).status_code == 200
        assert time.monotonic() - started < 1.0  # not behind the 2 s check
        slow.join(10)


# -- cancellation and the queue --------------------------------------------------------------
def test_non_streamed_request_is_cancelled_when_its_client_leaves() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=30)
    with start_server(fake) as srv:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(srv.url + "/chat/completions", json={"messages": HI}, timeout=0.5)
        gone = time.monotonic()
        assert fake.stopped.wait(5), "generation ran on for a client that left"
        assert time.monotonic() - gone < 1.0


def test_abandoned_queued_requests_leave_the_queue() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=30)
    with start_server(fake, max_waiting=2) as srv:
        done: list[int] = []
        running = threading.Thread(target=lambda: done.append(post(srv, {"messages": HI}).status_code))
        running.start()
        time.sleep(0.3)

        def leave_early(i: int) -> None:
            with pytest.raises(httpx.TimeoutException):
                post(srv, {"messages": HI, "user": f"gone{i}"}, timeout=0.5)

        for _ in range(3):  # three rounds of clients that fill the queue and leave
            leavers = [threading.Thread(target=leave_early, args=(i,)) for i in range(2)]
            for t in leavers:
                t.start()
            for t in leavers:
                t.join(5)
            deadline = time.monotonic() + 2
            while httpx.get(srv.base + "/health").json()["waiting"] and time.monotonic() < deadline:
                time.sleep(0.02)
            assert httpx.get(srv.base + "/health").json()["waiting"] == 0  # not 429 for the next
        assert fake.runs == 1 and not fake.stopped.is_set()  # they never ran; the first runs on
        fake.release.set()
        running.join(5)
        assert done == [200]


def test_queue_full_429_carries_retry_after() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=30)
    with start_server(fake, max_waiting=1) as srv:
        threads = [threading.Thread(target=post, args=(srv, {"messages": HI, "user": f"u{i}"}))
                   for i in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.2)
        r = post(srv, {"messages": HI})
        assert error_of(r, 429)["code"] == "queue_full"
        assert int(r.headers["retry-after"]) >= 1
        fake.release.set()
        for t in threads:
            t.join(5)


# -- HTTP details the probes found -----------------------------------------------------------
def test_500_closes_the_connection_and_the_next_request_succeeds() -> None:
    fake = FakeEngine(model_name=SERVED, context_length=4096, hold=0)
    with start_server(fake) as srv, httpx.Client(timeout=10) as client:
        for _ in range(10):
            r = client.post(srv.url + "/chat/completions", json={"messages": HI, "user": "boom"})
            assert error_of(r, 500)["message"].startswith("internal error")
            assert r.headers["connection"] == "close" and "secret" not in r.text
            assert client.post(srv.url + "/chat/completions", json={"messages": HI}).status_code == 200


def test_chunked_body_over_the_limit_is_413(server: Any) -> None:
    def chunks(total: int) -> Iterator[bytes]:
        body = json.dumps({"messages": [{"role": "user", "content": "x" * total}]}).encode()
        for i in range(0, len(body), 65_536):
            yield body[i:i + 65_536]

    r = httpx.post(server.url + "/chat/completions", content=chunks(3_000_000), timeout=30)
    assert "over 2,000,000 bytes" in error_of(r, 413)["message"]
    r = httpx.post(server.url + "/chat/completions", content=chunks(1_000), timeout=30)
    assert r.status_code == 200


def test_405_carries_allow(server: Any) -> None:
    r = httpx.get(server.url + "/chat/completions")
    error_of(r, 405)
    assert r.headers["allow"] == "POST"
    r = httpx.post(server.url + "/models")
    assert error_of(r, 405) and r.headers["allow"] == "GET"


def test_openapi_needs_the_api_key_when_one_is_set(engine: Any) -> None:
    with start_server(engine, api_key="sekret") as srv:
        error_of(httpx.get(srv.base + "/openapi.json"), 401)
        doc = httpx.get(srv.base + "/openapi.json", headers={"Authorization": "Bearer sekret"}).json()
        assert "/v1/chat/completions" in doc["paths"] and "ChatRequest" in doc["components"]["schemas"]
        error_of(httpx.get(f"{srv.url}/models/{SERVED}"), 401)
    with start_server(engine) as srv:
        assert httpx.get(srv.base + "/openapi.json").status_code == 200


# -- issue 20: one strict request layer; every wire variant fixed has its named test ---------
@pytest.mark.parametrize("extra,param,needle", [
    ({"stream": "yes"}, "stream", "boolean"),
    ({"temperature": "0.5"}, "temperature", "number"),
    ({"max_tokens": True}, "max_tokens", "integer"),
    ({"logprobs": "true"}, "logprobs", "boolean"),
    ({"n": 1.0}, "n", "integer"),
    ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage", "boolean"),
], ids=["stream-yes", "temperature-string", "max-tokens-bool", "logprobs-string", "n-float",
        "include-usage-string"])
def test_types_are_refused_not_coerced(server: Any, extra: dict, param: str, needle: str) -> None:
    """OpenAI answers 400 to a value of the wrong JSON type; so does chatlab (strict parsing)."""
    err = error_of(post(server, {"messages": HI, **extra}), 400)
    assert err["param"] == param and needle in err["message"], err


def test_an_int_is_still_a_number(server: Any) -> None:
    assert post(server, {"messages": HI, "temperature": 1, "top_p": 1, "max_tokens": 4}).status_code == 200


@pytest.mark.parametrize("extra,param,needle", [
    ({"logit_bias": {"5": 101}}, "logit_bias", "from -100"),
    ({"logit_bias": {"hello": 1}}, "logit_bias", "not a token id"),
    ({"logit_bias": {"99999999": 1}}, "logit_bias", "0..49151"),
    ({"messages": [{"role": "user", "content": "hi " * 5000}]}, "messages", "context window"),
    ({"max_tokens": 5000}, "max_tokens", "context window"),
    ({"tools": [TOOL] * 129}, "tools", "limit of 128"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/nowhere"}}}}}], "tool_choice": "required"},
     "tools[0].function.parameters.properties.a.$ref", "names nothing"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"enum": []}}}}}], "tool_choice": "required"},
     "tools[0].function.parameters", "grammar"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {
        "type": "string", "minLength": 5, "maxLength": 2}}}}, "response_format.json_schema.schema", "grammar"),
], ids=["logit-bias-value", "logit-bias-key", "logit-bias-vocab", "context-overflow",
        "max-tokens-overflow", "tool-limit", "dangling-ref", "empty-enum", "min-over-max"])
def test_param_is_filled(server: Any, extra: dict, param: str, needle: str) -> None:
    err = error_of(post(server, {"messages": HI, **extra}), 400)
    assert err["param"] == param and needle in err["message"], err


def test_echo_with_logprobs_names_logprobs(server: Any) -> None:
    err = error_of(post(server, {"prompt": "Once", "echo": True, "logprobs": 1}, "/completions"), 400)
    assert err["param"] == "logprobs" and "echo" in err["message"]


@pytest.mark.parametrize("extra,param", [({"suffix": "the end"}, "suffix"), ({"best_of": 3}, "best_of")],
                         ids=["suffix", "best-of"])
def test_unimplemented_completion_fields_are_refused(server: Any, extra: dict, param: str) -> None:
    err = error_of(post(server, {"prompt": "Once", "max_tokens": 3, **extra}, "/completions"), 400)
    assert err["param"] == param and "not supported" in err["message"]
    # asking for nothing is fine: best_of 1 and an empty suffix change nothing
    assert post(server, {"prompt": "Once", "max_tokens": 3, "best_of": 1, "suffix": ""},
                "/completions").status_code == 200


def test_penalties_reach_the_sampler_on_chat_and_completions(engine: Any, server: Any) -> None:
    from chatlab.engine import CompletionRequest, parse_request

    plan = engine.check(parse_request({"messages": HI, "presence_penalty": 0.5, "frequency_penalty": -1}))
    assert all(p.presence_penalty == 0.5 and p.frequency_penalty == -1.0 for p in plan.params)
    done = engine.check(parse_request({"prompt": "x", "n": 2, "frequency_penalty": 1.5}, CompletionRequest))
    assert [p.frequency_penalty for p in done.params[0]] == [1.5, 1.5]
    assert post(server, {"messages": HI, "presence_penalty": 2, "max_tokens": 4}).status_code == 200
    assert post(server, {"prompt": "Once", "frequency_penalty": 2, "max_tokens": 4},
                "/completions").status_code == 200


@pytest.mark.parametrize("schema,keyword,param", [
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "allOf", "response_format.json_schema.schema"),
    ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "not",
     "response_format.json_schema.schema.properties.a"),
    ({"$ref": "https://example.com/schema.json"}, "$ref", "response_format.json_schema.schema"),
], ids=["allof-incompatible", "not", "remote-ref"])
def test_schemas_the_grammar_cannot_enforce_are_400_naming_the_keyword(server: Any, schema: dict,
                                                                      keyword: str, param: str) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    err = error_of(post(server, {"messages": HI, "response_format": rf}), 400)
    assert err["param"] == param and repr(keyword) in err["message"], err
    # the same keyword in a forced tool's parameters names the tool
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                          "properties": {"x": schema}}}}
    err = error_of(post(server, {"messages": HI, "tools": [tool], "tool_choice": "required"}), 400)
    assert err["param"].startswith("tools[0].function.parameters.properties.x"), err


def test_enforceable_schemas_still_pass(server: Any) -> None:
    """No false refusals: a property named "not", a one-part allOf (as pydantic writes a
    described $ref), a local $ref. (An allOf of several parts is refused: the grammar compiler
    allows any JSON for it.)"""
    schema = {"type": "object", "properties": {"not": {"type": "string"}, "b": {"$ref": "#/$defs/b"},
                                               "c": {"allOf": [{"$ref": "#/$defs/b"}], "description": "c"}},
              "required": ["not"], "$defs": {"b": {"type": "integer"}}}
    rf = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    assert post(server, {"messages": HI, "response_format": rf, "max_tokens": 4}).status_code == 200


def test_the_plan_carries_its_compiled_constraint(engine: Any, monkeypatch: Any) -> None:
    from chatlab.engine import parse_request
    from chatlab.tools import constrain

    plan = engine.check(parse_request({"messages": HI, "tools": [TOOL], "tool_choice": "required"}))
    assert plan.constraint is not None and plan.constraint.kind == "tag" and plan.constrained

    def no_second_look(*_: Any, **__: Any) -> None:
        raise AssertionError("the run decided or compiled the grammar again")

    for name in ("decide", "compile_constraint", "_compile"):
        monkeypatch.setattr(constrain, name, no_second_look)
    # the engine's token source (the loop) builds its processor from the plan's grammar
    assert engine.source.constraint(plan).description == plan.constraint.description
    plain = engine.check(parse_request({"messages": HI}))
    assert plain.constraint is None and not plain.constrained


def test_oversized_prompt_is_refused_before_tokenizing(engine: Any, server: Any, monkeypatch: Any) -> None:
    """The bound from characters refuses it without the tokenizer seeing it; a prompt that fits
    (just under the bound) is never refused by it."""
    calls: list[int] = []
    real = engine.tokenizer.encode
    monkeypatch.setattr(engine.tokenizer, "encode", lambda text, *a, **k: calls.append(len(text)) or real(text, *a, **k))
    big = "x" * (engine.token_bound.max_chars * engine.context_length)
    err = error_of(post(server, {"prompt": big}, "/completions"), 400)
    assert err["param"] == "prompt" and "at least" in err["message"] and calls == []
    err = error_of(post(server, {"messages": [{"role": "user", "content": big}]}), 400)
    assert err["param"] == "messages" and "at least" in err["message"]
    # under the bound: tokenized, and refused only if the real count does not fit
    from chatlab.engine.bound import fits_before_tokenizing

    fits_before_tokenizing(engine, ["x" * (engine.token_bound.max_chars * (engine.context_length - 1))], "prompt")


def under_the_size_bounds(engine: Any) -> dict[str, str]:
    """Prompts one token under the character and byte bounds, too long for the window all the
    same: each kind of text falls into far more pieces than the longest token suggests."""
    import random
    import string

    bound, window = engine.token_bound, engine.context_length
    chars = bound.max_chars * (window - 1)
    dense = "😀中文字"
    return {"words": ("word " * chars)[:chars],
            "random ASCII": "".join(random.Random(0).choices(string.printable[:95], k=chars)),
            "emoji/CJK": dense * (bound.max_bytes * (window - 1) // len(dense.encode()))}


def test_prompts_under_the_size_bounds_are_refused_from_the_cuts_their_bytes_force(
        engine: Any, server: Any, monkeypatch: Any) -> None:
    """A byte pair that no token holds is a token boundary in any tokenization: counted, they
    refuse these prompts with the tokenizer never called, on both endpoints."""
    from chatlab.render.encoder import Encoder

    calls: list[int] = []
    real_encode, real_many = engine.tokenizer.encode, Encoder.encode_many
    monkeypatch.setattr(engine.tokenizer, "encode", lambda text, *a, **k: calls.append(len(text)) or real_encode(text, *a, **k))
    monkeypatch.setattr(Encoder, "encode_many", lambda self, texts, *a: calls.append(sum(map(len, texts))) or real_many(self, texts, *a))
    for kind, text in under_the_size_bounds(engine).items():
        for body, path, param in (({"prompt": text}, "/completions", "prompt"),
                                  ({"messages": [{"role": "user", "content": text}]}, "/chat/completions", "messages")):
            err = error_of(post(server, body, path), 400)
            assert err["param"] == param and err["code"] == "context_length_exceeded", (kind, err)
            assert "bytes of UTF-8 text, at least" in err["message"] and calls == [], (kind, err, calls)


def test_a_tokenized_prompt_too_long_for_the_window_hands_the_heap_back(engine: Any, server: Any,
                                                                       monkeypatch: Any) -> None:
    """One letter repeated: every pair of its bytes is inside some token, so no bound refuses it
    and it is tokenized; refused then, the heap its tokens grew is trimmed before the 400."""
    from chatlab.engine import plan

    trims: list[int] = []
    monkeypatch.setattr(plan, "trim_heap", lambda: trims.append(1) or 0)
    text = "a" * (engine.token_bound.max_chars * (engine.context_length - 1))
    for body, path, param in (({"prompt": text}, "/completions", "prompt"),
                              ({"messages": [{"role": "user", "content": text}]}, "/chat/completions", "messages")):
        err = error_of(post(server, body, path), 400)
        assert err["param"] == param and "fills the context window" in err["message"], err
    assert len(trims) == 2
    assert post(server, {"messages": HI, "max_tokens": 2}).status_code == 200 and len(trims) == 2


ATOMS = st.sampled_from(["word", " ", "  ", "\n", "\n\n", "\t", "the", "a", "7", "2024", ",", "!", "...",
                         "'s", "é", "e\u0301", "😀", "中文", "字", "<|im_end|>", "<think>", "Ġ", "\u00a0",
                         "ﬁ", "\r\n"]) | st.text(max_size=3)
BOUNDS: dict[str, Any] = {}  # TokenBound per tokenizer, built once
CONTENT = st.tuples(st.lists(ATOMS, max_size=40).map("".join), st.integers(1, 120)).map(lambda t: t[0] * t[1])


@settings(max_examples=40, deadline=None)
@example(contents=["\U000400c0" * 10], which="smollm2")  # SmolLM2 has no token for byte 0xF1: dropped
@example(contents=["", " "], which="smollm2")
@example(contents=["e\u0301" * 500], which="qwen3")  # NFC: one character, not two
@given(contents=st.lists(CONTENT, min_size=1, max_size=3), which=st.sampled_from(["smollm2", "qwen3", "qwen1"]))
def test_the_bound_never_exceeds_the_real_count(smollm2_tokenizer: Any, qwen3_tokenizer: Any,
                                                qwen1_tokenizer: Any, contents: list[str], which: str) -> None:
    """Sound on real vocabularies (byte-level BPE, Qwen3's with NFC, Qwen-1's tiktoken): the
    bound of a completion prompt is at most its tokens, that of a chat's contents at most the
    rendered prompt's, so a window one token larger is never refused."""
    from types import SimpleNamespace

    from chatlab.engine.bound import TokenBound, fits_before_tokenizing
    from chatlab.render import resolve

    tokenizer, name = {"smollm2": (smollm2_tokenizer, "smollm2-135m-instruct"),
                       "qwen3": (qwen3_tokenizer, "qwen3-tokenizer"),
                       "qwen1": (qwen1_tokenizer, "qwen1-tokenizer")}[which]
    bound = BOUNDS[which] = BOUNDS.get(which) or TokenBound.of(tokenizer)
    messages = [{"role": role, "content": c} for role, c in zip(["system", "user", "user"], contents)]
    rendered = resolve(tokenizer, name).render_request(messages)[1]
    assert bound.tokens_at_least(contents)[0] <= len(rendered.ids), rendered.text[:200]
    fits_before_tokenizing(SimpleNamespace(context_length=len(rendered.ids) + 1, token_bound=bound), contents, "messages")
    ids = tokenizer.encode(contents[0], add_special_tokens=False)
    assert bound.tokens_at_least(contents[:1])[0] <= len(ids)


def server_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def test_server_rss_flat_over_malformed_and_oversized_requests(engine: Any) -> None:
    """A separate server process (loopback), a bounded pass of malformed and ~1.9 MB requests:
    its RSS after the pass is within 10% of its RSS after a warm-up pass."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = ("import sys, uvicorn\n"
              "from chatlab.lab.evals.controls import ScriptedBackend\n"
              "from chatlab.engine import ChatEngine\n"
              "from chatlab.render import get_template\n"
              "from chatlab.render.io.jinja_writer import tokenizer_for\n"
              "from chatlab.serve.app import create_app\n"
              "e = ChatEngine(ScriptedBackend(tokenizer_for(get_template('qwen2.5')), ['Hello there.']),"
              " 'served-model', template='qwen2.5')\n"
              "uvicorn.run(create_app(e), host='127.0.0.1', port=int(sys.argv[1]), log_level='error')\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(port)], env=os.environ.copy())
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url[:-3] + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        big = "word " * 380_000  # 1.9 MB
        bodies = [*list(bad_bodies())[:40],
                  *[json.dumps({"messages": [{"role": "user", "content": big}]}).encode()] * 5,
                  *[json.dumps({"prompt": big}).encode()] * 5]

        def one_pass() -> None:
            with httpx.Client(timeout=60) as client:
                for raw in bodies:
                    path = "/completions" if raw.startswith(b'{"prompt"') else "/chat/completions"
                    r = client.post(url + path, content=raw, headers={"content-type": "application/json"})
                    assert 400 <= r.status_code < 500, r.text[:200]

        one_pass()  # warm-up: imports, caches, thread pool, allocator arenas
        baseline = server_rss_mb(proc.pid)
        for _ in range(2):
            one_pass()
        after = server_rss_mb(proc.pid)
        assert after <= baseline * 1.10, f"server RSS grew from {baseline:.0f} MB to {after:.0f} MB"
    finally:
        proc.terminate()
        proc.wait(30)
