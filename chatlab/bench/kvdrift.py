"""What the OpenVINO CPU plugin's default u8 KV cache does to greedy replies, measured once.

Left alone, the CPU plugin stores the KV cache in u8 even when asked for f32 arithmetic; chatlab
pins it to f32 (`KV_CACHE_PRECISION=f32`). This is the measurement behind that choice, and the
one number notebook 05 and the README quote: the fp32 export, greedy, a fixed number of tokens
(eos ignored), with the cache at u8 and at f32, each compared token by token with PyTorch f32.
The fp32 export isolates the cache: its weights are PyTorch's, so any difference at an f32 cache
is arithmetic order, and what the u8 cache adds is the cache's.

    python -m chatlab.bench.kvdrift --json | python -m chatlab.bench.stored kv-u8-drift.json \\
        --command "python -m chatlab.bench.kvdrift --json" --machine "..."
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

PROMPTS = ("Describe the water cycle.", "Describe a day in the life of a baker.",
           "Write a paragraph about the history of Rome.", "What is the capital of France?",
           "Explain how a bicycle works.", "Give three tips for learning a language.",
           "Tell me a story about a lighthouse keeper.", "Why is the sky blue?")


def greedy_ids(backend: Any, ids: Sequence[int], n: int) -> list[int]:
    """Exactly `n` greedy tokens (eos ignored): every engine emits the same length."""
    from chatlab.generate import SamplingParams, generate

    return list(generate(backend, list(ids), SamplingParams(max_new_tokens=n, ignore_eos=True)))[-1].token_ids


def measure(model: str = "smollm2-135m-instruct", tokens: int = 128,
            prompts: Sequence[str] = PROMPTS) -> dict[str, Any]:
    """For each cache precision, how many replies differ from PyTorch f32 and where each first does."""
    from chatlab.backends import load_backend
    from chatlab.finetune import first_difference
    from chatlab.render import resolve

    torch_backend = load_backend(model, "torch")
    res = resolve(torch_backend.tokenizer, model)
    rendered = [res.render([{"role": "user", "content": p}]).ids for p in prompts]
    reference = [greedy_ids(torch_backend, ids, tokens) for ids in rendered]
    del torch_backend  # one model in memory at a time
    caches: dict[str, Any] = {}
    for cache in ("u8", "f32"):
        backend = load_backend(model, "openvino", "fp32", precision="f32", kv_cache_precision=cache)
        firsts = [first_difference(greedy_ids(backend, ids, tokens), want)
                  for ids, want in zip(rendered, reference)]
        del backend
        caches[cache] = {"differ": sum(f is not None for f in firsts), "first_difference": firsts}
    return {"model": model, "tokens": tokens, "prompts": list(prompts), "weights": "fp32 export",
            "precision": "f32", "reference": "PyTorch f32", "caches": caches}


def drift_line(result: dict[str, Any]) -> str:
    """The one sentence every place quotes: u8 vs f32 cache, replies that left PyTorch's."""
    n, t = len(result["prompts"]), result["tokens"]
    u8, f32 = result["caches"]["u8"]["differ"], result["caches"]["f32"]["differ"]
    return (f"{result['weights']} at f32 arithmetic, {n} prompts x {t} greedy tokens vs {result['reference']}: "
            f"u8 KV cache {u8} of {n} replies differ, f32 KV cache {f32} of {n}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true", help="print the result as JSON (to store it)")
    args = ap.parse_args(argv)
    result = measure(args.model, args.tokens)
    print(json.dumps(result) if args.json else drift_line(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
