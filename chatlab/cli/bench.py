"""`chatlab bench`: chatlab's loop timed against hf-generate, optimum, genai and llama.cpp; and
its subcommands, each a measurement of chatlab.lab.bench (each says which in its help)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from chatlab.backends.registry import REGISTRY
from chatlab.cli.args import add_backend_args, add_speedup_args, options_from_args, speculation_from_args
from chatlab.errors import ChatlabError
from chatlab.lab.bench import (BenchConfig, accuracy, format_table, replay, run_benchmark, save_plot, serving,
                               speculate_run, turns)
from chatlab.lab.bench.engines import ENGINE_ROWS, ENGINES, EXTRA_ENGINES, REFERENCES
from chatlab.lab.bench.serving import ServingRun
from chatlab.lab.bench.speculate_run import SpeculateRun
from chatlab.lab.bench.report import FOLDER, label, store, write_json


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="time chatlab's loop against hf-generate, optimum and genai; "
                       "its subcommands measure the rest (chatlab bench --help)",
                       description="Without a subcommand: time chatlab's loop against hf-generate, "
                       "optimum, genai and llama.cpp. Each subcommand has its own options "
                       "(chatlab bench SUBCOMMAND --help), given after its name.")
    b.add_argument("--model", default="smollm2-135m-instruct")
    b.add_argument("--quick", action="store_true", help="fewer rounds and tokens (a few minutes)")
    b.add_argument("--json", action="store_true", help="print the results as one JSON object")
    b.add_argument("--engines", default="", help="comma-separated engines, or 'list' to print the table "
                   f"(default: {', '.join(ENGINES)}; llama.cpp-q4_1 skipped when "
                   f"llama-cpp-python is absent; also: {', '.join(EXTRA_ENGINES)})")
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
    b.add_argument("--plot", default="bench-results/bench.png", help="where to save the plot ('' for none)")
    b.set_defaults(func=run_bench)
    nested = b.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    for add in (add_accuracy, add_replay, add_turns, add_speculate, add_serving, add_store):
        add(nested)


def subcommand(nested: argparse._SubParsersAction, name: str, help: str,
               func: Callable[[argparse.Namespace], object], model: bool = True) -> argparse.ArgumentParser:
    """A `chatlab bench NAME` parser, with --model unless `model` is False. Flags given between
    `bench` and NAME are refused: argparse would let NAME's own defaults overwrite them without a word."""
    def checked(args: argparse.Namespace) -> None:
        before = args.argv[1:args.argv.index(name, 1)]
        if before:
            raise ChatlabError(f"{' '.join(before)}: give the options after the subcommand, "
                               f"chatlab bench {name} {' '.join(before)} ...")
        func(args)

    p = nested.add_parser(name, help=help, description=help)
    p.set_defaults(func=checked, command=f"bench {name}")
    if model:
        p.add_argument("--model", default="smollm2-135m-instruct")
    return p


def add_accuracy(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "accuracy", "exact vs the --fast profile: greedy agreement and eval scores "
                   "(chatlab.lab.bench.accuracy)", run_accuracy)
    p.add_argument("--tokens", type=int, default=None, help="new tokens per case (default 64)")
    p.add_argument("--limit", type=int, default=None, help="the first N cases of each set")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--out", default=None, help="write the result as JSON here")
    p.add_argument("--machine", default=None,
                   help="one line about the machine, labelling the JSON as a stored result")


def add_replay(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "replay", "tune a drafter without timing it: replay recorded greedy replies "
                   "through prompt lookup (chatlab.lab.bench.replay)",
                   lambda args: replay.run(args.file, record_first=args.record, past_end=args.past_end),
                   model=False)
    p.add_argument("--record", action="store_true", help="record the greedy replies first")
    p.add_argument("--file", default=None, help="the replies file (default data/bench/greedy-replies.json)")
    p.add_argument("--past-end", action="store_true",
                   help="replay all 64 recorded tokens, past each reply's end token")


def add_turns(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "turns", "time to first token over a growing chat, with and without prefix "
                   "reuse, side by side (chatlab.lab.bench.turns)",
                   lambda args: turns.run(args.model, args.turns, args.tokens, genai=args.genai))
    p.add_argument("--turns", type=int, default=8)
    p.add_argument("--tokens", type=int, default=16, help="reply tokens per turn")
    p.add_argument("--genai", action="store_true", help="also genai, prefix caching on and off")


def add_speculate(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "speculate", "prompt lookup and prefix reuse against their targets, in one "
                   "run (chatlab.lab.bench.speculate_run)", run_speculate)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds, one case per task each")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per task case")
    p.add_argument("--turns", type=int, default=8, help="turns of the growing chat (0: skip it)")
    p.add_argument("--turn-tokens", type=int, default=16, help="reply tokens per chat turn")
    p.add_argument("--draft-tokens", type=int, default=None,
                   help="the longest guess, for every prompt-lookup row (default: chatlab's loop "
                        "guesses up to 3 tokens, every pass padded to 1+3 on OpenVINO; genai drafts 4 per pass)")
    p.add_argument("--ngram", type=int, default=None, help="the longest n-gram looked up (default 3)")
    p.add_argument("--ignore-eos", action="store_true",
                   help="time exactly --tokens per case, past the reply's end token; by default a "
                        "reply ends at its end token, as served")
    p.add_argument("--engines", default=None, help="comma-separated (default: all rows, or with --fast "
                   "the fast profile's rows beside genai's and llama.cpp-q4_1)")
    p.add_argument("--fast", action="store_true",
                   help="the fast profile: chatlab's loop (plain, with prompt lookup) and genai given the "
                        "same settings, beside llama.cpp-q4_1; judged against the moonshot targets")
    p.add_argument("--precision", default="f32")
    p.add_argument("--out", default=None, help="the JSON file to write (default data/bench/speculate-run.json)")
    p.add_argument("--machine", default=None,
                   help="one line about the machine, quiet or shared: labels the JSON as a stored "
                        "result (chatlab.lab.bench.report), which notebook 05 can then print")


def add_serving(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "serving", "streamed tokens/s through HTTP vs the engine alone; or N "
                   "concurrent clients on one server (chatlab.lab.bench.serving)", run_serving)
    add_backend_args(p)  # the registry's --backend, --weight-format, --precision and options
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=None, help="default 5; 2 with --clients")
    p.add_argument("--clients", type=int, default=0, help="N concurrent streaming clients")
    p.add_argument("--equal", type=int, default=4,
                   help="with --clients: greedy replies compared with the OpenVINO loop (0: skip)")
    p.add_argument("--json", action="store_true", help="with --clients: print the result as JSON")


def add_store(nested: argparse._SubParsersAction) -> None:
    p = subcommand(nested, "store", "label a bench run's JSON (on stdin) with its command and machine "
                   "and keep it in data/bench/ (chatlab.lab.bench.report)", run_store, model=False)
    p.add_argument("name", help="file name inside data/bench/, e.g. full-run.json")
    p.add_argument("--command", dest="run_command", metavar="COMMAND", required=True, help="the command whose JSON is on stdin")
    p.add_argument("--machine", required=True, help="one line: which machine, quiet or shared")


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


def run_bench(args: argparse.Namespace) -> None:
    if args.engines == "list":
        print(engine_table())
        return
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


def command_line(args: argparse.Namespace) -> str:
    """The command as typed, recorded in a run's JSON."""
    return " ".join(["chatlab", *args.argv])


def run_accuracy(args: argparse.Namespace) -> None:
    result = accuracy.measure(args.model, args.limit, args.tokens or 64)
    if args.machine:
        result = label(result, command_line(args), args.machine)
    if args.out:
        result["written_to"] = str(write_json(result, args.out))
    print(json.dumps(result, indent=2) if args.json else accuracy.format_report(result))


def run_speculate(args: argparse.Namespace) -> None:
    engines = tuple(e for e in args.engines.split(",") if e) if args.engines else None
    speculate_run.run(SpeculateRun(
        model=args.model, rounds=args.rounds, tokens=args.tokens, turns=args.turns,
        turn_tokens=args.turn_tokens, draft_tokens=args.draft_tokens, ngram=args.ngram,
        ignore_eos=args.ignore_eos, engines=engines, fast=args.fast, precision=args.precision,
        out=args.out or SpeculateRun.out, machine=args.machine, command=command_line(args)))


def run_serving(args: argparse.Namespace) -> None:
    serving.run(ServingRun(model=args.model, backend=args.backend, weight_format=args.weight_format,
                           precision=args.precision, options=options_from_args(args), tokens=args.tokens,
                           rounds=args.rounds, clients=args.clients, equal=args.equal, as_json=args.json))


def run_store(args: argparse.Namespace) -> None:
    store(args.name, sys.stdin.read(), args.run_command, args.machine)
    print(f"stored data/{FOLDER}/{args.name}")
