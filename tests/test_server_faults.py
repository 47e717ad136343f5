"""One bad request never breaks the server: each test sends what once did harm, then checks the
answer is a 400 naming the field (or a valid reply) and that the server still serves.

The fast tests run the real ChatEngine on ScriptedBackend (no model); the genai ones share one
`--backend genai` server over the SmolLM2 int8 export.
"""
from __future__ import annotations

import contextlib
import json
import random
import string
import threading
import time
from typing import Any, Iterator

import httpx
import pytest

from chatlab.errors import ChatlabError
from chatlab.serve import start_server

MODEL = "smollm2-135m-instruct"
HI = [{"role": "user", "content": "hi"}]
PATTERN = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"}},
           "required": ["a"]}


def json_schema(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def post(srv: Any, body: dict[str, Any], path: str = "/chat/completions", **kw: Any) -> httpx.Response:
    return httpx.post(srv.url + path, json=body, timeout=120, **kw)


def error_of(r: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status, r.text
    return r.json()["error"]


# -- chatlab's loop, scripted ----------------------------------------------------------------
@pytest.fixture(scope="module")
def engine() -> Any:
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    backend = ScriptedBackend(tokenizer_for(get_template("qwen2.5")), ["Hello there."])
    return ChatEngine(backend, "served", template="qwen2.5")


@pytest.fixture(scope="module")
def server(engine: Any) -> Iterator[Any]:
    with start_server(engine) as srv:
        yield srv


def script(engine: Any, *replies: str) -> None:
    engine.backend.replies = [engine.backend.tokenizer.encode(r, add_special_tokens=False) for r in replies]
    engine.backend.calls = 0


# -- a genai server --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def genai_server() -> Iterator[Any]:
    from chatlab.engine import load_engine

    engine = load_engine(MODEL, "genai", "int8", precision="f32", max_seqs=2)
    with start_server(engine) as srv:
        srv.engine = engine
        yield srv
    engine.backend.close()


def test_grammar_genai_cannot_read_is_found_in_the_printed_text() -> None:
    """The check reads the grammar text itself: a builtin call, or any name no rule defines."""
    from chatlab.engine.batched import UnreadableGrammar, readable_ebnf
    from chatlab.tools.ebnf import unknown_names

    assert unknown_names('root ::= ("a" b "[x]" [a-z\\]] c{1, -1})\nb ::= "q"\nc ::= "\\"r"') == []
    assert unknown_names('root ::= Regex("^[a-z]+$", json_string=true)') == ["Regex", "json_string", "true"]
    assert readable_ebnf('root ::= ("a"{0, -1})') == 'root ::= ("a"{0,})'
    with pytest.raises(UnreadableGrammar, match="Regex"):
        readable_ebnf('root ::= Regex("a")')


@pytest.mark.slow
def test_genai_pattern_is_refused_and_the_next_request_is_served(genai_server: Any) -> None:
    for extra in ({"response_format": json_schema(PATTERN)},
                  {"tools": [{"type": "function", "function": {"name": "f", "parameters": PATTERN}}]}):
        err = error_of(post(genai_server, {"messages": HI, "max_tokens": 24, **extra}))
        assert err["param"].endswith("parameters.properties.a") or \
            err["param"] == "response_format.json_schema.schema.properties.a", err
        assert "'pattern'" in err["message"] and "--backend openvino" in err["message"]
        r = post(genai_server, {"messages": HI, "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        r = post(genai_server, {"prompt": "Once", "max_tokens": 4}, "/completions")
        assert r.status_code == 200, r.text


@pytest.mark.slow
def test_genai_pipeline_is_rebuilt_after_a_failed_step(genai_server: Any) -> None:
    """By construction: even a grammar that gets past the check and fails inside the shared
    pipeline costs only the requests running then; the next one gets a fresh pipeline."""
    import openvino_genai as genai

    from chatlab.engine.batched import generation_config
    from chatlab.generate import SamplingParams

    backend = genai_server.engine.backend
    before = backend.rebuilds
    bad = genai.StructuredOutputConfig(grammar='root ::= "a" undefined_rule')
    stream = backend.submit([1, 2, 3], generation_config(SamplingParams(max_new_tokens=4), set(), bad))
    items = []
    while (item := stream.get(60)) is not None:
        items.append(item)
    assert isinstance(items[-1], ChatlabError) and stream.status == "FAILED"
    deadline = time.monotonic() + 60  # the streams hear the error first, then it rebuilds
    while backend.rebuilds == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backend.rebuilds == before + 1
    r = post(genai_server, {"messages": HI, "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"], r.text


SELF = [({"$ref": "#"}, "#"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "#/$defs/a"),
        ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "#")]


def refusals_of_endless_schemas(srv: Any) -> None:
    for schema, ref in SELF:
        err = error_of(post(srv, {"messages": HI, "max_tokens": 16, "response_format": json_schema(schema)}))
        assert err["param"].startswith("response_format.json_schema.schema") and err["param"].endswith("$ref")
        assert repr(ref) in err["message"] and "must contain itself" in err["message"]
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        err = error_of(post(srv, {"messages": HI, "max_tokens": 16, "tools": [tool], "tool_choice": "required"}))
        assert err["param"].startswith("tools[0].function.parameters"), err
    # a $ref back to the same value, through anyOf only: defined by itself (jsonschema recurses)
    loop = {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    err = error_of(post(srv, {"messages": HI, "max_tokens": 16, "response_format": json_schema(loop)}))
    assert err["param"] == "response_format.json_schema.schema.anyOf[0].$ref" and "leads back to itself" in err["message"]
    # recursion that may stop is fine: a tree whose children are optional
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "kids": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"]}
    assert post(srv, {"messages": HI, "max_tokens": 16, "response_format": json_schema(tree)}).status_code == 200


def test_self_referencing_schemas_are_refused_naming_the_ref(server: Any) -> None:
    refusals_of_endless_schemas(server)


@pytest.mark.slow
def test_genai_self_referencing_schemas_are_refused_naming_the_ref(genai_server: Any) -> None:
    refusals_of_endless_schemas(genai_server)


def test_a_grammar_dead_end_is_an_error_naming_it_never_nan() -> None:
    """The backstop behind the check: a grammar that allows no token raises ChatlabError (a
    400, or an error event mid-stream), never NaN probabilities in sampling."""
    import numpy as np
    import xgrammar as xgr

    from chatlab.tools.constrain import GrammarProcessor

    info = xgr.TokenizerInfo(["a", "b", "c", "</s>"], stop_token_ids=[3])
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "a" loop\nloop ::= ((loop))')
    proc = GrammarProcessor(compiled, 4, "test")
    proc.accept(0)
    with pytest.raises(ChatlabError, match="allows no next token"):
        proc.mask(np.zeros(4, dtype=np.float32))


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def streamed(srv: Any, body: dict[str, Any]) -> tuple[str, list[str], list[dict[str, Any]]]:
    """(content, called names, error events) of a streamed reply."""
    content, names, errors = "", [], []
    with httpx.stream("POST", srv.url + "/chat/completions", json={**body, "stream": True}, timeout=60) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                errors.append(chunk["error"])
                continue
            delta = chunk["choices"][0]["delta"]
            content += delta.get("content") or ""
            names += [c["function"]["name"] for c in delta.get("tool_calls") or [] if c.get("function", {}).get("name")]
    return content, names, errors


def test_no_partial_close_tag_in_content_when_max_tokens_cuts_it(server: Any, engine: Any) -> None:
    script(engine, CALL)
    ids = engine.tokenizer.encode(CALL, add_special_tokens=False)
    close_from = len(engine.tokenizer.encode(CALL[:CALL.index("</tool_call>")], add_special_tokens=False))
    for choice in ("auto", "required"):
        for n in range(close_from, len(ids) + 1):  # every cut inside "</tool_call>"
            body = {"messages": HI, "tools": WEATHER, "tool_choice": choice, "max_tokens": n, "temperature": 0}
            engine.backend.calls = 0
            r = post(server, body)
            assert r.status_code == 200, r.text
            message = r.json()["choices"][0]["message"]
            assert message["content"] is None, (choice, n, message)
            assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
            engine.backend.calls = 0
            assert streamed(server, body) == ("", ["get_weather"], []), (choice, n)


def test_forced_call_cut_before_its_name_is_a_400_naming_max_tokens(server: Any, engine: Any) -> None:
    script(engine, CALL)
    body = {"messages": HI, "tools": WEATHER, "tool_choice": "required", "max_tokens": 5, "temperature": 0}
    err = error_of(post(server, body))
    assert err["param"] == "max_tokens" and "max_tokens=5" in err["message"]
    engine.backend.calls = 0
    content, names, errors = streamed(server, body)
    assert not names and errors and errors[0]["param"] == "max_tokens"
    # room enough: the call
    engine.backend.calls = 0
    r = post(server, {**body, "max_tokens": 64})
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_client_error_in_a_stream_is_typed_as_when_unstreamed(server: Any, engine: Any,
                                                                monkeypatch: Any) -> None:
    """max_tokens cutting a forced call before its name is the client's choice: the error event
    in a stream is the 400's own body (invalid_request_error, message, param, code). A failure
    of the server's own stays a server_error that tells nothing of its insides."""
    script(engine, CALL)
    body = {"messages": HI, "tools": WEATHER, "tool_choice": "required", "max_tokens": 5, "temperature": 0}
    unstreamed = error_of(post(server, body))
    engine.backend.calls = 0
    _, names, errors = streamed(server, body)
    assert unstreamed["type"] == "invalid_request_error" and errors == [unstreamed], errors
    assert not names

    def broken(token_id: int) -> Any:
        raise RuntimeError("the backend's secret state")

    monkeypatch.setattr(engine.backend, "step", broken)
    _, _, errors = streamed(server, {"messages": HI, "max_tokens": 8})
    assert [e["type"] for e in errors] == ["server_error"] and "secret" not in errors[0]["message"]


def name_done_after(engine: Any, body: dict[str, Any], name: str) -> int:
    """How many tokens the engine's reply to `body` (temperature 0) takes to complete the forced
    call's name: the length limit at which that call is first returned."""
    from chatlab.engine import parse_request

    text = ""
    for n, ev in enumerate(engine.events(engine.check(parse_request(body))), 1):
        text += getattr(ev, "text", "")
        if f'"{name}"' in text:
            return n
    raise AssertionError(f"the reply never named {name}: {text!r}")


def check_cut_after_the_name(srv: Any, engine: Any) -> None:
    """One token short of the name: a 400 naming max_tokens, streamed or not. With the name
    complete: the call, finish_reason "length", its arguments as far as they got."""
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": WEATHER,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "temperature": 0}
    n = name_done_after(engine, {**body, "max_tokens": 64}, "get_weather")
    err = error_of(post(srv, {**body, "max_tokens": n - 1}))
    assert err["param"] == "max_tokens" and err["type"] == "invalid_request_error"
    assert streamed(srv, {**body, "max_tokens": n - 1})[2] == [err]
    choice = post(srv, {**body, "max_tokens": n}).json()["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] is None, choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather" and call["function"]["arguments"][:1] in ("", "{")
    assert streamed(srv, {**body, "max_tokens": n}) == ("", ["get_weather"], [])


@pytest.mark.slow
def test_genai_forced_call_cut_after_its_name_is_a_call(genai_server: Any) -> None:
    check_cut_after_the_name(genai_server, genai_server.engine)


# a schema of anything but an object: a call's arguments could never match it
NOT_OBJECTS = {"array": {"type": "array", "items": {"type": "integer"}}, "root-enum": {"enum": ["a", "b"]},
               "string": {"type": "string"}, "untyped": {"properties": {"city": {"type": "string"}}},
               "nullable": {"type": ["object", "null"]}}


def refuses_parameters_that_are_no_object(srv: Any, parameters: dict[str, Any]) -> None:
    tools = [*WEATHER, {"type": "function", "function": {"name": "f", "parameters": parameters}}]
    for choice in ({"type": "function", "function": {"name": "f"}}, "required", "auto"):
        err = error_of(post(srv, {"messages": HI, "tools": tools, "tool_choice": choice, "max_tokens": 8}))
        assert err["param"] == "tools[1].function.parameters" and '"type": "object"' in err["message"], err
    err = error_of(post(srv, {"messages": HI, "functions": [{"name": "f", "parameters": parameters}]}))
    assert err["param"] == "functions[0].parameters", err


@pytest.mark.parametrize("parameters", list(NOT_OBJECTS.values()), ids=list(NOT_OBJECTS))
def test_a_tool_whose_parameters_are_no_object_is_a_400_naming_them(server: Any, engine: Any,
                                                                    parameters: dict[str, Any]) -> None:
    refuses_parameters_that_are_no_object(server, parameters)
    # no parameters, sent as nothing or as {}: a model that tries to pass an array is held to an
    # object by the grammar, and the forced call comes back as a call
    script(engine, '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>')
    for fn in ({"name": "f"}, {"name": "f", "parameters": {}}):
        engine.backend.calls = 0
        r = post(server, {"messages": HI, "tools": [{"type": "function", "function": fn}],
                          "tool_choice": {"type": "function", "function": {"name": "f"}}, "temperature": 0,
                          "max_tokens": 40})
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls", r.text
        assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {}


@pytest.mark.slow
def test_genai_tool_whose_parameters_are_no_object_is_a_400_naming_them(genai_server: Any) -> None:
    for parameters in NOT_OBJECTS.values():
        refuses_parameters_that_are_no_object(genai_server, parameters)


def test_top_k_past_the_vocabulary_cuts_nothing() -> None:
    from chatlab.engine.batched import generation_config
    from chatlab.generate import SamplingParams

    unset = generation_config(SamplingParams(temperature=1.0), set()).top_k
    for k in (49_152, 2**64, 10**30):
        assert generation_config(SamplingParams(temperature=1.0, top_k=k), set(), None, 49_152).top_k == unset
    assert generation_config(SamplingParams(temperature=1.0, top_k=40), set(), None, 49_152).top_k == 40


@pytest.mark.slow
def test_genai_huge_top_k_is_served(genai_server: Any) -> None:
    for k in (2**64, 10**30, 49_152):
        r = post(genai_server, {"messages": HI, "max_tokens": 4, "top_k": k, "seed": 1})
        assert r.status_code == 200, r.text
        r = post(genai_server, {"prompt": "Once", "max_tokens": 4, "top_k": k, "temperature": 0.7}, "/completions")
        assert r.status_code == 200, r.text


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_dense_prompts_are_refused_before_tokenizing_and_memory_stays_flat(engine: Any) -> None:
    """1.5 MB of emoji and CJK is few characters but many bytes: the byte bound refuses it
    before the tokenizer sees it, so fifty such requests leave the server's memory where it was."""
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine

    wide = ChatEngine(ScriptedBackend(engine.tokenizer, ["Hello."], context_length=8192), "served",
                      template="qwen2.5")
    dense = "😀中文字" * 110_000  # 440,000 characters, 1,430,000 bytes of UTF-8
    assert len(dense) // wide.token_bound.max_chars < wide.context_length  # the character bound passes it
    chat = json.dumps({"messages": [{"role": "user", "content": dense}], "max_tokens": 4},
                      ensure_ascii=False).encode()
    text = json.dumps({"prompt": dense, "max_tokens": 4}, ensure_ascii=False).encode()
    headers = {"content-type": "application/json"}
    with start_server(wide) as srv:
        def send(path: str, body: bytes) -> None:
            r = httpx.post(srv.url + path, content=body, headers=headers, timeout=60)
            err = error_of(r)
            assert "bytes of UTF-8 text" in err["message"], err
            assert err["param"] == ("messages" if path == "/chat/completions" else "prompt")

        for path, body in (("/chat/completions", chat), ("/completions", text)):
            send(path, body)  # warm: the first of each allocates what every later one reuses
        start = rss_mb()
        for i in range(50):
            send(*(("/chat/completions", chat) if i % 2 else ("/completions", text)))
        end = rss_mb()
        assert post(srv, {"messages": HI, "max_tokens": 4}).status_code == 200
    print(f"RSS after 50 dense rejected prompts: {start:.0f} MB -> {end:.0f} MB ({end - start:+.0f} MB)")
    assert end - start < 100


class PeakRss:
    """The process's highest RSS in MB over a `with` block: the kernel's own high-water mark
    (VmHWM), reset on entry by writing 5 to /proc/self/clear_refs; where the kernel refuses the
    reset, RSS sampled by a thread every 2 ms."""

    def __enter__(self) -> "PeakRss":
        self.mb, self._stop, self._thread = 0.0, threading.Event(), None
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.mb = max(self.mb, rss_mb())
            time.sleep(0.002)

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            return
        with open("/proc/self/status") as f:
            self.mb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def near_the_byte_bound(kind: str, nbytes: int) -> str:
    """A prompt of about `nbytes` UTF-8 bytes, of one kind of text."""
    if kind == "words":
        return ("word " * (nbytes // 5 + 1))[:nbytes]
    if kind == "random ASCII":
        rng = random.Random(0)
        return "".join(rng.choices(string.ascii_letters + string.digits + string.punctuation + " ", k=nbytes))
    if kind == "emoji/CJK":
        return "😀中文字" * (nbytes // len("😀中文字".encode()))
    return "a" * nbytes  # one letter: every pair of its bytes is inside some token


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["openvino", "genai"])
def test_rejected_prompts_near_the_byte_bound_give_their_memory_back(backend: str, request: Any) -> None:
    """Ten prompts of each kind, each 98% of the bytes that a bound from the longest token alone
    lets through and too long for the window, on the real model (chatlab's loop, then genai):
    the server's RSS after them is within 100 MB of its RSS before, kind by kind and over all
    four. Prints before, peak and after per kind."""
    from chatlab.engine import load_engine

    if backend == "genai":
        srv = request.getfixturevalue("genai_server")
        engine, server = srv.engine, contextlib.nullcontext(srv)
    else:
        engine = load_engine(MODEL, "openvino")
        server = start_server(engine)
    size = engine.token_bound.max_bytes * engine.context_length * 98 // 100
    numbers: dict[str, tuple[float, float, float]] = {}
    with server as srv:
        assert post(srv, {"messages": HI, "max_tokens": 2}).status_code == 200  # the path is warm
        for kind in ("words", "random ASCII", "emoji/CJK", "one letter"):
            body = json.dumps({"messages": [{"role": "user", "content": near_the_byte_bound(kind, size)}]},
                              ensure_ascii=False).encode()
            before = rss_mb()
            with PeakRss() as peak:
                for _ in range(10):
                    r = httpx.post(srv.url + "/chat/completions", content=body, timeout=120,
                                   headers={"content-type": "application/json"})
                    err = error_of(r)
                    assert err["code"] == "context_length_exceeded" and err["param"] == "messages", err
                    assert "the context window" in err["message"], err
            numbers[kind] = (before, peak.mb, rss_mb())
            print(f"{backend} {kind}: RSS {before:.0f} MB before, {peak.mb:.0f} MB peak, "
                  f"{numbers[kind][2]:.0f} MB after ({numbers[kind][2] - before:+.0f} MB)")
        assert post(srv, {"messages": HI, "max_tokens": 2}).status_code == 200
    kept = {kind: after - before for kind, (before, _, after) in numbers.items()}
    kept["all four"] = numbers["one letter"][2] - numbers["words"][0]
    assert all(mb < 100 for mb in kept.values()), kept


def test_openai_error_details(server: Any, engine: Any) -> None:
    """Context overflow carries OpenAI's code; null means the default where the spec allows
    null; the auth scheme is case-insensitive (RFC 7235)."""
    long = "word " * engine.context_length
    for body, path in (({"messages": HI, "max_tokens": 10_000}, "/chat/completions"),
                       ({"messages": [{"role": "user", "content": long}]}, "/chat/completions"),
                       ({"prompt": long}, "/completions"),
                       ({"messages": [{"role": "user", "content": "x" * 10**6}]}, "/chat/completions")):
        err = error_of(post(server, body, path))
        assert err["code"] == "context_length_exceeded", err
    err = error_of(post(server, {"messages": HI, "temperature": 9}))
    assert err["code"] is None and err["param"] == "temperature"
    r = post(server, {"messages": HI, "n": None, "stream": None, "logprobs": None, "max_tokens": 4})
    assert r.status_code == 200 and len(r.json()["choices"]) == 1, r.text
    r = post(server, {"prompt": "Once", "n": None, "stream": None, "echo": None, "max_tokens": 4}, "/completions")
    assert r.status_code == 200 and not r.json()["choices"][0]["text"].startswith("Once"), r.text
    err = error_of(post(server, {"messages": HI, "n": "2"}))
    assert err["param"] == "n"
    with start_server(engine, api_key="sk-test") as srv:
        for header in ("Bearer sk-test", "bearer sk-test", "BEARER sk-test"):
            assert post(srv, {"messages": HI, "max_tokens": 4}, headers={"Authorization": header}).status_code == 200
        for header in ("Bearer sk-other", "Basic sk-test", "sk-test", "Bearersk-test", ""):
            err = error_of(post(srv, {"messages": HI}, headers={"Authorization": header}), 401)
            assert err["code"] == "invalid_api_key"


@pytest.mark.slow
def test_genai_refusals_name_their_param(genai_server: Any) -> None:
    for extra, param in (({"logprobs": True}, "logprobs"), ({"logit_bias": {"42": 5}}, "logit_bias")):
        err = error_of(post(genai_server, {"messages": HI, "max_tokens": 4, **extra}))
        assert err["param"] == param and "--backend openvino" in err["message"]
    err = error_of(post(genai_server, {"prompt": "Hi", "max_tokens": 4, "logprobs": 2}, "/completions"))
    assert err["param"] == "logprobs"


UNENFORCED = [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems", ""),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}, "contains", ""),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "dependentRequired": {"a": ["b"]}}, "dependentRequired", ""),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "dependentSchemas": {"a": {"required": ["b"]}}}, "dependentSchemas", ""),
    ({"type": "object", "properties": {"v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
      "required": ["v"]}, "oneOf", ".properties.v"),
    ({"type": "object", "properties": {"v": {"allOf": [{"type": "integer", "minimum": 5},
                                                       {"type": "integer", "maximum": 9}]}},
      "required": ["v"]}, "allOf", ".properties.v"),
]


def test_unenforced_keywords_are_refused_naming_them(server: Any) -> None:
    for schema, keyword, at in UNENFORCED:
        err = error_of(post(server, {"messages": HI, "max_tokens": 8, "response_format": json_schema(schema)}))
        assert err["param"] == "response_format.json_schema.schema" + at, err
        assert f"uses {keyword!r}, which constrained decoding cannot enforce" in err["message"]
        if schema["type"] != "object":  # a tool's parameters are an object: the schema goes in one
            schema, at = {"type": "object", "properties": {"x": schema}}, ".properties.x" + at
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        err = error_of(post(server, {"messages": HI, "max_tokens": 8, "tools": [tool]}))
        assert err["param"] == "tools[0].function.parameters" + at and keyword in err["message"]
    # what the grammar does enforce stays accepted
    for schema in ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 1},
                   {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                   {"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                              {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]}]}):
        assert post(server, {"messages": HI, "max_tokens": 4, "response_format": json_schema(schema)}).status_code == 200


# the shapes a demanding client tried (tests/test_tools_constrain.py has them on the loop)
SHAPES = [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/n", "minimum": 1000}}, "required": ["a"],
     "$defs": {"n": {"type": "integer", "maximum": 99999}}},
    {"type": "object", "properties": {"m": {"$ref": "#minute"}}, "required": ["m"],
     "$defs": {"m": {"$anchor": "minute", "type": "integer", "minimum": 0, "maximum": 59}}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
     "required": ["a", "b"], "maxProperties": 2},
    {"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"},
                                      "at": {"type": "string", "format": "time"},
                                      "on": {"type": "string", "format": "date-time"}}, "required": ["ip", "at", "on"]},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/a~1b"}, "t": {"$ref": "#/$defs/c~0d"}},
     "required": ["a", "t"], "$defs": {"a/b": {"type": "integer", "maximum": 3}, "c~d": {"enum": ["x", "y"]}}},
]


@pytest.mark.slow
def test_genai_enforces_the_loops_rewritten_schemas(genai_server: Any) -> None:
    """The genai backend gets the same rewritten schema, its format patterns written out as
    rules its older grammar reader takes: sampled replies validate, and what the loop refuses
    it refuses with the same 400."""
    import jsonschema

    for schema in SHAPES:
        check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        for seed in range(3):
            r = post(genai_server, {"messages": [{"role": "user", "content": "Reply in JSON."}], "max_tokens": 120,
                                    "temperature": 1, "seed": seed, "response_format": json_schema(schema)})
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            assert choice["finish_reason"] == "stop", choice
            assert check.is_valid(json.loads(choice["message"]["content"])), (schema, choice)
    tool = {"type": "function", "function": {"name": "f", "parameters": SHAPES[0]}}
    r = post(genai_server, {"messages": HI, "max_tokens": 60, "temperature": 1, "seed": 1, "tools": [tool],
                            "tool_choice": {"type": "function", "function": {"name": "f"}}})
    [call] = r.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["a"] >= 1000, call
    ghost = {"type": "object", "properties": {}, "additionalProperties": False, "required": ["ghost"]}
    err = error_of(post(genai_server, {"messages": HI, "max_tokens": 8, "response_format": json_schema(ghost)}))
    assert err["param"] == "response_format.json_schema.schema" and "'required'" in err["message"]


# -- random schemas ----------------------------------------------------------------------------
from urllib.parse import quote  # noqa: E402 - the property test's own imports

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from chatlab.tools.enforceable import FORMAT_PATTERNS, FORMATS  # noqa: E402

LEAF = st.one_of(
    st.builds(lambda lo, hi: {"type": "string", "minLength": lo, "maxLength": lo + hi},
              st.integers(0, 3), st.integers(0, 4)),
    st.builds(lambda lo: {"type": "integer", "minimum": lo}, st.integers(-5, 50)),
    st.just({"type": "number"}), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.builds(lambda vs: {"enum": vs}, st.lists(st.sampled_from(["a", "b", 1, None, True]), min_size=1,
                                               max_size=3, unique_by=repr)),
    st.just({"type": "string", "pattern": "^[a-c]+$"}), st.just({"$ref": "#"}), st.just({}),
    # formats the grammar enforces, and some it refuses (by name)
    st.builds(lambda f: {"type": "string", "format": f},
              st.sampled_from(sorted(FORMATS | set(FORMAT_PATTERNS)) + ["password", "uri-template", "iri"])),
)


def _object(props: dict[str, Any], required: list[str], closed: bool, listed_only: bool) -> dict[str, Any]:
    """An object schema; `required` may name properties `properties` does not list (with
    `additionalProperties: false` too, which no object matches)."""
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": [k for k in required if k in props or not listed_only]}
    if closed:
        out["additionalProperties"] = False
    return out


def _referring(target: Any, key: str, by_anchor: bool, beside: dict[str, Any]) -> dict[str, Any]:
    """A schema whose one required property is `target`, reached through `$defs[key]` by a JSON
    pointer (its name escaped as RFC 6901 and URI fragments say) or by an `$anchor`, with
    `beside` next to the $ref."""
    if by_anchor:
        target, ref = {**target, "$anchor": "it"}, "#it"
    else:
        ref = "#/$defs/" + quote(key.replace("~", "~0").replace("/", "~1"), safe="~$")
    return {"type": "object", "properties": {"v": {"$ref": ref, **beside}}, "required": ["v"],
            "$defs": {key: target}}


SCHEMAS = st.recursive(LEAF, lambda inner: st.one_of(
    st.builds(lambda items, lo, unique: {"type": "array", "items": items, "minItems": lo,
                                         "maxItems": lo + 2, **({"uniqueItems": True} if unique else {})},
              inner, st.integers(0, 2), st.booleans()),
    st.builds(_object, st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
              st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True), st.booleans(), st.booleans()),
    st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda xs: {"oneOf": xs}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=2)),
    st.builds(lambda x: {"not": x}, inner),
), max_leaves=6)
# the same, some reached through a $ref: names that need escaping, an $anchor, keywords beside
SCHEMAS = st.one_of(SCHEMAS, st.builds(
    _referring, SCHEMAS, st.sampled_from(["plain", "a/b", "c~d", "e f", "~1", "x%y"]), st.booleans(),
    st.sampled_from([{}, {"description": "d"}, {"minimum": 3}, {"maxLength": 2}, {"type": "string"},
                     {"required": ["z"]}, {"properties": {}}, {"format": "ipv4"}])))


def closer(tokenizer: Any) -> Any:
    """A scripted backend whose every row prefers ending what is open (then eos), so a
    grammar-led reply finishes: the grammar masks what it forbids, the highest allowed wins."""
    import numpy as np

    from chatlab.lab.evals.controls import ScriptedBackend

    class Closer(ScriptedBackend):
        def _row(self) -> Any:
            return row.copy()

    backend = Closer(tokenizer, ["x"])
    row = np.zeros(backend.vocab_size, dtype=np.float32)
    for rank, text in enumerate(["}", "]", '"', ",", "0", "1", "a", "true", "null", ":"]):
        (token,) = tokenizer.encode(text, add_special_tokens=False)
        row[token] = 20.0 - rank
    row[backend.eos_ids[0]] = 30.0
    return backend


@pytest.fixture(scope="module")
def closer_server(engine: Any) -> Iterator[Any]:
    from chatlab.engine import ChatEngine

    with start_server(ChatEngine(closer(engine.tokenizer), "served", template="qwen2.5")) as srv:
        yield srv


def names_a_keyword(message: str, schema: Any) -> bool:
    """Whether a refusal names one of the keywords the schema uses, quoted (or xgrammar's own
    reason, for what its compiler refuses: a minimum above the maximum, an empty enum)."""
    keys: set[str] = set()
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            keys |= set(node)
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return any(f"{k!r}" in message or f"({k} " in message for k in keys) or "cannot be turned into a grammar" in message


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS)
def test_random_schemas_are_enforced_or_refused_and_the_server_goes_on(closer_server: Any, schema: Any) -> None:
    import jsonschema

    r = post(closer_server, {"messages": HI, "max_tokens": 120, "temperature": 1, "seed": 0, "n": 2,
                             "response_format": json_schema(schema)})
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        error = r.json()["error"]
        assert error["param"].startswith("response_format.json_schema"), r.text
        assert names_a_keyword(error["message"], schema), r.text
    else:
        check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        for choice in r.json()["choices"]:
            if choice["finish_reason"] == "stop":  # a reply cut by max_tokens is unfinished JSON
                value = json.loads(choice["message"]["content"])
                assert check.is_valid(value), (schema, value)
    r = post(closer_server, {"messages": HI, "max_tokens": 4})
    assert r.status_code == 200, r.text


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS)
def test_genai_random_schemas_never_break_the_shared_pipeline(genai_server: Any, schema: Any) -> None:
    import jsonschema

    r = post(genai_server, {"messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": 48,
                            "temperature": 0, "response_format": json_schema(schema)})
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert names_a_keyword(r.json()["error"]["message"], schema), r.text
    elif r.json()["choices"][0]["finish_reason"] == "stop":
        check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        value = json.loads(r.json()["choices"][0]["message"]["content"])
        assert check.is_valid(value), (schema, value)
    r = post(genai_server, {"messages": HI, "max_tokens": 4})
    assert r.status_code == 200, r.text
