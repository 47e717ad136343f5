"""The server's wire behaviour, with a scripted engine (no model): errors, auth, limits, queue,
disconnects, SSE framing. Real-model tests are in test_serve_clients.py."""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from chatlab.serve import start_server
from fake_engine import FakeEngine


@pytest.fixture()
def engine() -> FakeEngine:
    return FakeEngine(["one", "two", "three"])


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], **extra}


def assert_error(r: httpx.Response, status: int, needle: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert needle in err["message"] and "Traceback" not in r.text
    return err


def test_health_models_and_chat(engine: FakeEngine) -> None:
    with start_server(engine) as srv:
        assert httpx.get(srv.base + "/health").json()["status"] == "ok"
        models = httpx.get(srv.url + "/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == "scripted"
        r = httpx.post(srv.url + "/chat/completions", json=body())
        assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": "one two three",
                                                     "refusal": None}


def test_api_key(engine: FakeEngine) -> None:
    with start_server(engine, api_key="sekret") as srv:
        assert_error(httpx.get(srv.url + "/models"), 401, "API key")
        bad = {"Authorization": "Bearer nope"}
        assert_error(httpx.post(srv.url + "/chat/completions", json=body(), headers=bad), 401, "API key")
        ok = {"Authorization": "Bearer sekret"}
        assert httpx.post(srv.url + "/chat/completions", json=body(), headers=ok).status_code == 200
        assert httpx.get(srv.base + "/health").status_code == 200  # probes need no key


@pytest.mark.parametrize("payload,status,needle,param", [
    (b"{not json", 400, "not valid JSON", None),
    ({"model": "scripted"}, 400, "messages", "messages"),
    (body(temperature=5), 400, "temperature", "temperature"),
    (body(top_p=0), 400, "top_p", "top_p"),
    (body(messages=[{"role": "wizard", "content": "x"}]), 400, "role", "messages[0].role"),
    (body(max_tokens=1000), 400, "context window", "max_tokens"),
    (body(messages=[{"role": "user", "content": "x"}] * 300), 400, "over the limit", "messages"),
    (body(user="boom"), 500, "internal error", None),
], ids=["bad-json", "no-messages", "temperature", "top-p", "role",
        "max-tokens", "too-many-messages", "engine-crash"])
def test_bad_requests_get_openai_errors(engine: FakeEngine, payload: Any, status: int,
                                        needle: str, param: str | None) -> None:
    with start_server(engine) as srv:
        kw = {"content": payload, "headers": {"content-type": "application/json"}} \
            if isinstance(payload, bytes) else {"json": payload}
        r = httpx.post(srv.url + "/chat/completions", **kw)
        err = assert_error(r, status, needle)
        assert err["param"] == param
        assert "secret internal detail" not in r.text


def test_unknown_route_and_body_limit(engine: FakeEngine) -> None:
    with start_server(engine, max_body_bytes=1000) as srv:
        assert_error(httpx.get(srv.url + "/nope"), 404, "Not Found")
        big = body(messages=[{"role": "user", "content": "x" * 5000}])
        assert_error(httpx.post(srv.url + "/chat/completions", json=big), 413, "over 1,000 bytes")
        assert httpx.post(srv.url + "/chat/completions", json=body()).status_code == 200


def test_sse_framing(engine: FakeEngine) -> None:
    with start_server(engine) as srv:
        r = httpx.post(srv.url + "/chat/completions", json=body(stream=True))
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [e for e in r.text.split("\n\n") if e.strip()]
        assert all(e.startswith("data: ") for e in events)
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e[6:]) for e in events[:-1]]
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "onetwothree"
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_full_queue_answers_429_then_recovers(engine: FakeEngine) -> None:
    engine.gate.clear()  # the first request holds the model
    with start_server(engine, max_waiting=1) as srv:
        results: list[int] = []

        def send() -> None:
            results.append(httpx.post(srv.url + "/chat/completions", json=body(), timeout=30).status_code)

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.3)  # one running, one waiting
        assert_error(httpx.post(srv.url + "/chat/completions", json=body()), 429, "queue is full")
        engine.gate.set()
        for t in threads:
            t.join(30)
        assert results == [200, 200]


def test_disconnect_stops_generation_and_server_keeps_serving() -> None:
    engine = FakeEngine([f"w{i} " for i in range(200)], delay=0.02)
    with start_server(engine) as srv:
        with httpx.stream("POST", srv.url + "/chat/completions", json=body(stream=True)) as r:
            lines = r.iter_lines()
            got = [next(lines) for _ in range(6)]
        assert any("w1" in line for line in got)
        deadline = time.monotonic() + 10
        while not engine.streamed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.streamed and engine.streamed[0] < 200  # stopped early, not run to the end
        assert httpx.post(srv.url + "/chat/completions", json=body()).status_code == 200


def test_fair_queue_alternates_clients() -> None:
    import asyncio

    from chatlab.serve.queue import FairQueue

    order: list[str] = []
    gate = threading.Event()

    async def main() -> None:
        q = FairQueue(max_waiting=10)
        jobs = [q.submit(lambda emit, cancelled: gate.wait(5), "first")]
        for client in ["a", "a", "a", "b", "c"]:
            jobs.append(q.submit(lambda emit, cancelled, c=client: order.append(c), client))
        gate.set()
        for job in jobs:
            async for _ in job:
                pass
        q.close()

    asyncio.run(main())
    assert order == ["a", "b", "c", "a", "a"]


def test_a_stopped_server_lets_go_of_its_engine() -> None:
    """A notebook that stops a server and drops its engine gets the model's memory back (what
    lets notebooks 07/08 load a second model under Binder's 2 GB). FastAPI keeps every endpoint
    it has served in module-level caches, so routes that closed over the engine would keep it
    alive for good: the app must hold it in one place and drop it on shutdown."""
    import gc
    import weakref

    engine = FakeEngine(["one", "two", "three"])  # not the fixture: pytest keeps those
    srv = start_server(engine)
    assert httpx.post(srv.url + "/chat/completions", json=body()).status_code == 200
    assert httpx.get(srv.url + "/models").json()["data"][0]["id"] == "scripted"
    alive = weakref.ref(engine)
    srv.stop()
    assert srv.app.state.engine is None
    del engine, srv
    gc.collect()
    assert alive() is None, [type(r).__name__ for r in gc.get_referrers(alive())]
