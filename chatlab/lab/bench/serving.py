"""Streamed tokens/s through HTTP vs the engine alone, in interleaved rounds; or N concurrent
clients against one on one server, read against the engine's own batching gain."""
from __future__ import annotations

import json
import math
import multiprocessing
import statistics
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from chatlab._thirdparty import Jsonable, LoaderOption
from chatlab.backends import get_spec
from chatlab.backends.precision import cpu_info
from chatlab.backends.registry import DEFAULT_BACKEND
from chatlab.engine import ChatEngine, load_engine, parse_request
from chatlab.engine.plan import ChatPlan
from chatlab.generate import Event, Finished, TextDelta
from chatlab.lab.bench.report import ceiling_line, clients_lines, cpu_name, kept
from chatlab.lab.finetune import first_difference
from chatlab.serve import start_server

STORY_CHAT = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]


@dataclass(frozen=True)
class ServingRun:
    """What `chatlab bench serving` measures (`rounds` None: 5, or 2 with clients)."""

    model: str = "smollm2-135m-instruct"
    backend: str = DEFAULT_BACKEND
    weight_format: str | None = None
    precision: str | None = None
    options: dict[str, LoaderOption] = field(default_factory=dict)
    tokens: int = 128
    rounds: int | None = None
    clients: int = 0
    equal: int = 4
    as_json: bool = False


def chat_plan(engine: ChatEngine, body: dict[str, Jsonable]) -> ChatPlan:
    """The engine's plan for a chat request body."""
    plan = engine.check(parse_request(body))
    assert isinstance(plan, ChatPlan)
    return plan


def token_events(engine: ChatEngine, plan: ChatPlan) -> list[Event]:
    """The engine's events for the plan's first choice, ending with Finished."""
    return list(engine.events(plan))


def raw_rate(engine: ChatEngine, tokens: int) -> float:
    plan = chat_plan(engine, {"messages": STORY_CHAT, "max_tokens": tokens, "temperature": 0, "ignore_eos": True})
    # a delta may carry several tokens (a batched source, speculation): count tokens, not deltas
    stamps = [(time.perf_counter(), len(ev.token_ids)) for ev in engine.events(plan)
              if isinstance(ev, TextDelta) and ev.token_ids]
    return (sum(n for _, n in stamps) - 1) / (stamps[-1][0] - stamps[0][0])


def stream_reply(url: str, model: str, messages: list[dict[str, str]], tokens: int,
                 clock: Callable[[], float], timeout: float) -> tuple[list[float], int]:
    """One streamed greedy reply of exactly `tokens`: when each chunk with content arrived (by
    `clock`), and the usage chunk's completion tokens."""
    import httpx

    body = {"model": model, "messages": messages, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    stamps, used = [], 0
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=timeout) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content": "' in line and '"content": ""' not in line:
                stamps.append(clock())
            if line.startswith("data: {") and '"usage": {' in line:
                used = json.loads(line[6:])["usage"]["completion_tokens"]
    return stamps, used


def http_rate(url: str, model: str, tokens: int) -> float:
    stamps, used = stream_reply(url, model, STORY_CHAT, tokens, time.perf_counter, 300)
    # a chunk may carry several tokens: the usage's count, not the chunks, over the same span
    return (used - 1) / (stamps[-1] - stamps[0])


STORY_PROMPTS = ["Tell me a long story about a lighthouse keeper.", "Explain how a bicycle works.",
           "Write a poem about the sea at night.", "Describe a day in the life of a baker.",
           "What should I pack for a hiking trip?", "Explain photosynthesis to a child.",
           "Write a letter to a friend about moving to a new city.", "How do airplanes fly?"]


def one_client(url: str, model: str, prompt: str, tokens: int) -> dict[str, float]:
    """One streamed greedy reply: when it was sent, its first content, its end; its tokens."""
    t0 = time.time()  # wall clock: comparable across client processes
    stamps, used = stream_reply(url, model, [{"role": "user", "content": prompt}], tokens, time.time, 600)
    return {"start": t0, "ttft": (stamps[0] if stamps else 0.0) - t0, "end": time.time(), "tokens": used}


def concurrent(pool: Executor, url: str, model: str, clients: int, tokens: int) -> dict[str, Jsonable]:
    """`clients` streams at once, each in its own process (threads would take the server's GIL)."""
    runs = list(pool.map(one_client, [url] * clients, [model] * clients,
                         [STORY_PROMPTS[i % len(STORY_PROMPTS)] for i in range(clients)], [tokens] * clients))
    wall = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    return {"tok_s": sum(r["tokens"] for r in runs) / wall, "ttft": [r["ttft"] for r in runs]}


def pipeline_rate(engine: ChatEngine, plans: list[ChatPlan]) -> float:
    """Tokens/s of `plans` run at once through the engine without HTTP: the server's ceiling."""
    def drain(plan: ChatPlan) -> int:
        # one consumer per stream, as in the server: genai's scheduler waits for every stream's ids
        last = token_events(engine, plan)[-1]
        assert isinstance(last, Finished)
        return last.completion_tokens

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(plans)) as pool:
        total = sum(pool.map(drain, plans))
    return total / (time.perf_counter() - t0)


def greedy_equality(engine: ChatEngine, args: ServingRun) -> dict[str, Jsonable]:
    """K prompts, greedy, `tokens` each: chatlab's OpenVINO loop at f32 vs the served engine."""
    loop = load_engine(args.model, "openvino", args.weight_format, precision="f32")
    same, firsts = 0, []
    for prompt in STORY_PROMPTS[:args.equal]:
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": args.tokens, "temperature": 0}
        ours = token_events(loop, chat_plan(loop, body))[-1]
        served = token_events(engine, chat_plan(engine, body))[-1]
        assert isinstance(ours, Finished) and isinstance(served, Finished)
        diff = first_difference(ours.token_ids, served.token_ids)
        same += diff is None
        firsts.append(diff)
    return {"prompts": args.equal, "identical": same, "first_difference": firsts}


def load_main(args: ServingRun) -> dict[str, Jsonable]:
    """N concurrent clients against one client on one server (and the engine alone beside it)."""
    weight_format = args.weight_format or get_spec(args.backend).default_weight_format
    rounds = args.rounds or 2
    options = dict(args.options)
    if get_spec(args.backend).source == "batched":
        options.setdefault("max_seqs", args.clients)
    engine = load_engine(args.model, args.backend, weight_format, precision=args.precision, **options)
    solo, many, ttfts, raw_solo, raw_many = [], [], [], [], []
    plans = [chat_plan(engine, {"messages": [{"role": "user", "content": p}], "max_tokens": args.tokens,
                                "temperature": 0, "ignore_eos": True})
             for p in (STORY_PROMPTS * args.clients)[:args.clients]]
    ctx = multiprocessing.get_context("spawn")  # no fork of a process running OpenVINO threads
    with start_server(engine, max_waiting=max(32, 2 * args.clients)) as srv, \
            ProcessPoolExecutor(args.clients, mp_context=ctx) as pool:
        concurrent(pool, srv.url, args.model, args.clients, 8)  # warm-up (and start the processes)
        for _ in range(rounds):
            solo.append(concurrent(pool, srv.url, args.model, 1, args.tokens)["tok_s"])
            run = concurrent(pool, srv.url, args.model, args.clients, args.tokens)
            many.append(run["tok_s"])
            ttfts += run["ttft"]
            if engine.max_concurrency > 1:  # the server is idle now: the engine alone, same prompts
                raw_solo.append(pipeline_rate(engine, plans[:1]))
                raw_many.append(pipeline_rate(engine, plans))
    result: dict[str, Jsonable] = {
        "backend": args.backend, "weight_format": weight_format, "precision": args.precision,
        "clients": args.clients, "tokens": args.tokens, "rounds": rounds,
        "one_client_tok_s": statistics.median(solo), "n_clients_tok_s": statistics.median(many),
        "ttft_p50_s": statistics.median(ttfts),
        "ttft_p95_s": sorted(ttfts)[math.ceil(0.95 * len(ttfts)) - 1],  # the nearest-rank percentile
        "cpu": cpu_info()}
    result["ratio"] = result["n_clients_tok_s"] / result["one_client_tok_s"]
    if raw_solo:
        result["engine_one_tok_s"] = statistics.median(raw_solo)
        result["engine_n_tok_s"] = statistics.median(raw_many)
        result["engine_ratio"] = result["engine_n_tok_s"] / result["engine_one_tok_s"]
    if args.equal:
        result["greedy_equality"] = greedy_equality(engine, replace(args, weight_format=weight_format))
    if "engine_ratio" in result:
        result["kept_of_ceiling"] = kept(result)
    if args.as_json:
        print(json.dumps(result, indent=2))
        return result
    print("\n".join(clients_lines(result, " (target >= 4x)")))
    if "engine_ratio" in result:
        print(f"the pipeline alone (no server, same prompts): 1 {result['engine_one_tok_s']:.1f} tok/s, "
              f"{args.clients} {result['engine_n_tok_s']:.1f} tok/s, ratio {result['engine_ratio']:.2f}x")
    print(ceiling_line(result, cpu_name(result["cpu"])))
    if args.equal:
        eq = result["greedy_equality"]
        print(f"greedy equality vs chatlab's OpenVINO loop at f32: {eq['identical']}/{eq['prompts']} "
              f"identical; first differing position per prompt: {eq['first_difference']}")
    return result


def run(args: ServingRun) -> dict[str, Jsonable]:
    """The measurement `args` asks for, printed; its result returned."""
    if args.clients:
        return load_main(args)
    rounds = args.rounds or 5
    engine = load_engine(args.model, args.backend, args.weight_format, precision=args.precision,
                         **args.options)
    raw, http = [], []
    with start_server(engine) as srv:
        raw_rate(engine, 8)  # warm-up both paths
        http_rate(srv.url, args.model, 8)
        for _ in range(rounds):
            raw.append(raw_rate(engine, args.tokens))
            http.append(http_rate(srv.url, args.model, args.tokens))
    result = {"raw_tok_s": statistics.median(raw), "http_tok_s": statistics.median(http)}
    result["ratio"] = result["http_tok_s"] / result["raw_tok_s"]
    print(f"{args.backend}/{args.weight_format}, {args.tokens} tokens, {rounds} rounds")
    print(f"engine     {result['raw_tok_s']:7.1f} tok/s (min {min(raw):.1f}, max {max(raw):.1f})")
    print(f"HTTP + SSE {result['http_tok_s']:7.1f} tok/s (min {min(http):.1f}, max {max(http):.1f})")
    print(f"ratio      {result['ratio']:.2f}x  (target >= 0.90x)")
    return result
