"""`chatlab bench`: chatlab's loop timed against hf-generate, optimum, genai and llama.cpp."""
from __future__ import annotations

import argparse
import json

from chatlab.backends.engines import ENGINE_ROWS, REFERENCES, engine_names
from chatlab.backends.registry import REGISTRY
from chatlab.engine.speedups import add_speedup_args


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="time chatlab's loop against hf-generate, optimum and genai")
    b.add_argument("--model", default="smollm2-135m-instruct")
    b.add_argument("--quick", action="store_true", help="fewer rounds and tokens (a few minutes)")
    b.add_argument("--json", action="store_true", help="print the results as one JSON object")
    b.add_argument("--engines", default="", help="comma-separated engines, or 'list' to print the table "
                   f"(default: {', '.join(engine_names('default'))}; llama.cpp-q4_1 skipped when "
                   f"llama-cpp-python is absent; also: {', '.join(engine_names('extra', 'speculative', 'int4'))})")
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


def engine_table() -> str:
    """`chatlab bench --engines list`: every row of the registry with what it runs."""
    lines = []
    for row in ENGINE_ROWS.values():
        runtime = REGISTRY[row.runtime].summary if row.runtime in REGISTRY else REFERENCES[row.runtime].summary
        options = "".join(f", {k}={v}" for k, v in row.options.items())
        lookup = ", prompt lookup" if row.prompt_lookup else ""
        lines.append(f"{row.name:<28} {row.group:<11} {row.runtime} {row.weight_format}{options}{lookup}: "
                     f"{runtime}")
    return "\n".join(lines)


def run_bench(args: argparse.Namespace) -> int:
    if args.engines == "list":
        print(engine_table())
        return 0
    from chatlab.lab.bench import BenchConfig, format_table, run_benchmark, save_plot
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
