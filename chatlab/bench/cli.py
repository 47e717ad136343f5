"""`chatlab bench`: chatlab's loop timed against hf-generate, optimum, genai and llama.cpp."""
from __future__ import annotations

import argparse
import json

from chatlab.engine.speedups import add_speedup_args


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="time chatlab's loop against hf-generate, optimum and genai")
    b.add_argument("--model", default="smollm2-135m-instruct")
    b.add_argument("--quick", action="store_true", help="fewer rounds and tokens (a few minutes)")
    b.add_argument("--json", action="store_true", help="print the results as one JSON object")
    b.add_argument("--engines", default="", help="comma-separated engines (default: all of chatlab.bench.ENGINES, "
                        "llama.cpp-q4_1 skipped when llama-cpp-python is absent; genai-int8-sdpa can be added)")
    b.add_argument("--precision", default="f32",
                   help="arithmetic of every engine: f32 (default) or bf16 (CPUs with bf16 only)")
    b.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, quick 3)")
    b.add_argument("--tokens", type=int, default=None, help="new tokens per run (default 128, quick 64)")
    b.add_argument("--task", default=None, help="a task shape instead of the short question: "
                   "extract, rag, rewrite (copy-heavy) or story (copies nothing)")
    add_speedup_args(b, reuse=False)
    b.add_argument("--plot", default="bench-results/bench.png",
                   help="where to save the plot ('' for none)")
    b.set_defaults(func=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    from chatlab.bench import BenchConfig, format_table, run_benchmark, save_plot
    from chatlab.engine.speedups import speculation_from_args

    config = BenchConfig.make(args.model, quick=args.quick, rounds=args.rounds, tokens=args.tokens,
                              engines=[e for e in args.engines.split(",") if e],
                              precision=args.precision, task=args.task,
                              speculate=speculation_from_args(args))
    result = run_benchmark(config, progress=not args.json)
    if args.plot:
        result["plot"] = str(save_plot(result, args.plot))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
        if args.plot:
            print(f"plot: {result['plot']}")
    return 0
