"""Real clients against the real server on the real default model."""
from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

MODEL = "smollm2-135m-instruct"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def client(live_server: Any) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=live_server.url, api_key="unused", max_retries=0, timeout=120)


def test_openai_sync_and_models(client: Any) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    out = client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=20)
    assert "Paris" in out.choices[0].message.content and out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens > 0


def test_openai_async(live_server: Any) -> None:
    from openai import AsyncOpenAI

    async def main() -> str:
        c = AsyncOpenAI(base_url=live_server.url, api_key="unused", max_retries=0)
        out = await c.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=20)
        return out.choices[0].message.content or ""

    assert "Paris" in asyncio.run(main())


def test_openai_stream_with_usage(client: Any) -> None:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=FRANCE, temperature=0, max_tokens=20, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Paris" in text
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0


def test_openai_tool_call_streamed_and_not(client: Any) -> None:
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=WEATHER,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              temperature=0, max_tokens=200)
    out = client.chat.completions.create(**kw)
    call = out.choices[0].message.tool_calls[0]
    assert out.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    args = json.loads(call.function.arguments)
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    for chunk in client.chat.completions.create(stream=True, **kw):
        state.handle_chunk(chunk)
    final = state.get_final_completion()
    streamed = final.choices[0].message.tool_calls[0]
    assert streamed.function.name == "get_weather" and json.loads(streamed.function.arguments) == args


def test_openai_parse_structured_output(client: Any) -> None:
    class Dog(BaseModel):
        name: str
        color: str

    out = client.chat.completions.parse(
        model=MODEL, response_format=Dog, temperature=0, max_tokens=200,
        messages=[{"role": "user", "content": "John had a dog named Harry, who was a brown beagle "
                                              "that loved chicken. Extract the dog."}])
    dog = out.choices[0].message.parsed
    assert isinstance(dog, Dog) and dog.name and dog.color


def test_sixteen_parallel_mixed_requests_match_serial(live_server: Any, client: Any) -> None:
    prompts = [f"Name a fruit that is {c}." for c in ["red", "yellow", "green", "orange"]]

    def one(i: int) -> str:
        msgs = [{"role": "user", "content": prompts[i % 4]}]
        if i % 2:
            chunks = client.chat.completions.create(model=MODEL, messages=msgs, temperature=0,
                                                    max_tokens=12, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        r = httpx.post(live_server.url + "/chat/completions", timeout=120, json={
            "model": MODEL, "messages": msgs, "temperature": 0, "max_tokens": 12, "user": f"u{i}"})
        return r.json()["choices"][0]["message"]["content"]

    alone = [one(i) for i in range(4)]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(one, range(16)))
    assert together == [alone[i % 4] for i in range(16)]


def test_real_errors_over_http(live_server: Any) -> None:
    url = live_server.url + "/chat/completions"
    image = {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    r = httpx.post(url, json=image)
    assert r.status_code == 400 and "text only" in r.json()["error"]["message"]
    r = httpx.post(url, json={"model": MODEL, "messages": FRANCE, "max_tokens": 10**6})
    assert r.status_code == 400 and "context window" in r.json()["error"]["message"]
    r = httpx.post(url, json={"model": MODEL, "messages": FRANCE, "tool_choice": "required",
                                 "max_tokens": 5}, timeout=60)
    assert r.status_code == 200  # llama-index sends required with no tools: not an error


def test_disconnect_mid_stream_then_serve_again(live_server: Any, client: Any) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 400, "stream": True, "temperature": 0}
    with httpx.stream("POST", live_server.url + "/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(6):
            next(lines)
    out = client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=20)
    assert "Paris" in out.choices[0].message.content


def test_completions_and_render_endpoints(live_server: Any, client: Any) -> None:
    out = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=5, temperature=0)
    assert out.choices[0].text and out.choices[0].finish_reason == "length"
    r = httpx.post(live_server.url + "/chat/render", json={"model": MODEL, "messages": FRANCE})
    data = r.json()
    assert data["text"].startswith("<|im_start|>") and data["ids"][0] == 1
    assert data["rule"] and data["stop_ids"] and len(data["tokens"]) == len(data["ids"])
