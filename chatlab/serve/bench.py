"""Streamed tokens/s through HTTP vs the raw loop, side by side on one model and prompt.

    python -m chatlab.serve.bench [--backend torch|openvino] [--tokens 128] [--rounds 5]

Both sides generate exactly `--tokens` tokens (ignore_eos) from the same rendered prompt, in
interleaved rounds so that a noisy machine slows both alike. Decode rate = (tokens - 1) / (time
from the first token to the last); the HTTP side counts chunks as the client receives them.
Target: HTTP ≥ 0.9× the raw loop.
"""
from __future__ import annotations

import argparse
import statistics
import time

import httpx

from chatlab.engine import ChatEngine, parse_request
from chatlab.serve import start_server

PROMPT = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]


def raw_rate(engine: ChatEngine, tokens: int) -> float:
    from chatlab.generate import TextDelta, generate

    plan = engine.check(parse_request({"messages": PROMPT, "max_tokens": tokens, "temperature": 0,
                                       "ignore_eos": True}))
    stamps = [time.perf_counter() for ev in generate(engine.backend, list(plan.prompt_ids), plan.params[0])
              if isinstance(ev, TextDelta)]
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def http_rate(url: str, model: str, tokens: int) -> float:
    body = {"model": model, "messages": PROMPT, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True, "stream": True}
    stamps = []
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=300) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content": "' in line and '"content": ""' not in line:
                stamps.append(time.perf_counter())
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--backend", default="openvino", help="openvino (int8 by default) or torch")
    ap.add_argument("--weight-format", default=None, help="fp32, int8 or int4 (default per backend)")
    ap.add_argument("--precision", default="f32", help="f32 or bf16 (a CPU with bf16 only)")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    engine = ChatEngine.load(args.model, args.backend, args.weight_format, precision=args.precision)
    raw, http = [], []
    with start_server(engine) as srv:
        raw_rate(engine, 8)  # warm-up both paths
        http_rate(srv.url, args.model, 8)
        for _ in range(args.rounds):
            raw.append(raw_rate(engine, args.tokens))
            http.append(http_rate(srv.url, args.model, args.tokens))
    result = {"raw_tok_s": statistics.median(raw), "http_tok_s": statistics.median(http)}
    result["ratio"] = result["http_tok_s"] / result["raw_tok_s"]
    print(f"{args.backend}/{args.weight_format}, {args.tokens} tokens, {args.rounds} rounds")
    print(f"raw loop   {result['raw_tok_s']:7.1f} tok/s (min {min(raw):.1f}, max {max(raw):.1f})")
    print(f"HTTP + SSE {result['http_tok_s']:7.1f} tok/s (min {min(http):.1f}, max {max(http):.1f})")
    print(f"ratio      {result['ratio']:.2f}x  (target >= 0.90x)")
    return result


if __name__ == "__main__":
    main()
