"""`chatlab bench`: chatlab's loop timed against hf-generate, optimum, genai and llama.cpp."""
from __future__ import annotations

import argparse
import json

from chatlab.backends.engines import ENGINE_ROWS, REFERENCES, engine_names
from chatlab.backends.registry import REGISTRY
from chatlab.cli.args import add_speedup_args, speculation_from_args


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="time chatlab's loop against hf-generate, optimum and genai; "
                       "'bench accuracy': what the fast profile costs in answers")
    b.add_argument("mode", nargs="?", default="speed", choices=("speed", "accuracy"),
                   help="speed (default): time the engines; accuracy: exact vs --fast profile, greedy "
                        "agreement and eval scores (chatlab.lab.bench.accuracy)")
    b.add_argument("--model", default="smollm2-135m-instruct")
    b.add_argument("--quick", action="store_true", help="fewer rounds and tokens (a few minutes)")
    b.add_argument("--json", action="store_true", help="print the results as one JSON object")
    b.add_argument("--engines", default="", help="comma-separated engines, or 'list' to print the table "
                   f"(default: {', '.join(engine_names('default'))}; llama.cpp-q4_1 skipped when "
                   f"llama-cpp-python is absent; also: {', '.join(engine_names('extra', 'speculative', 'int4', 'fast'))})")
    b.add_argument("--fast", action="store_true",
                   help="the fast profile's rows (bf16 where the CPU has it, u8 KV cache, dynamic "
                        "activation quantization, int4): chatlab's loop, with prompt lookup, and "
                        "genai given the same settings, beside llama.cpp-q4_1 (its accuracy cost: "
                        "chatlab bench accuracy)")
    b.add_argument("--precision", default="f32",
                   help="arithmetic of every engine: f32 (default) or bf16 (CPUs with bf16 only)")
    b.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, quick 3)")
    b.add_argument("--tokens", type=int, default=None, help="new tokens per run (default 128, quick 64)")
    b.add_argument("--task", default=None, help="a task shape instead of the short question: "
                   "extract, rag, rewrite (copy-heavy) or story (copies nothing)")
    add_speedup_args(b, reuse=False)
    b.add_argument("--limit", type=int, default=None, help="accuracy: the first N cases of each set")
    b.add_argument("--out", default=None, help="accuracy: write the result as JSON here")
    b.add_argument("--machine", default=None,
                   help="accuracy: one line about the machine, labelling the JSON as a stored result")
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
    if args.mode == "accuracy":
        return run_accuracy(args)
    from chatlab.lab.bench import BenchConfig, format_table, run_benchmark, save_plot

    config = BenchConfig.make(args.model, quick=args.quick, rounds=args.rounds, tokens=args.tokens,
                              engines=[e for e in args.engines.split(",") if e],
                              precision=args.precision, task=args.task,
                              speculate=speculation_from_args(args), fast=args.fast)
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


def run_accuracy(args: argparse.Namespace) -> int:
    import sys

    from chatlab.lab.bench.accuracy import format_report, measure
    from chatlab.lab.bench.stored import write_json

    result = measure(args.model, args.limit, args.tokens or 64)
    if args.machine:
        from chatlab.lab.bench.stored import label

        result = label(result, " ".join(["chatlab", *sys.argv[1:]]), args.machine)
    if args.out:
        result["written_to"] = str(write_json(result, args.out))
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0
