"""Issue 23's measurement in one command: prompt lookup and prefix reuse against their targets.

    python -m chatlab.bench.speculate_run            # ~9 minutes on a quiet 2-core machine
    python -m chatlab.bench.speculate_run --rounds 1 --tokens 8 --turns 2 --out /tmp/x.json

Part 1 times the task shapes of chatlab.bench.tasks side by side (chatlab.bench.sidebyside):
copy-heavy (07's extraction, 08's RAG answers over their passages, a rewrite) and a story that
copies nothing, on chatlab's paged OpenVINO loop plain and with prompt lookup, genai plain and
with its own prompt lookup, llama.cpp's Q4_1 when installed, and the int4 rows (equal bits with
Q4_1). Part 2 times turn 1..8 of a growing chat: chatlab's loop with and without prefix reuse,
and genai's chat mode. Then each target's ratio is printed next to it as MET or MISSED (a target
whose engine could not run says why), and everything is written to `--out` as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab._thirdparty import Jsonable
from chatlab.bench.llamacpp import ENGINE as LLAMA_CPP
from chatlab.bench.tasks import COPY_TASKS

PLAIN, PL, GENAI, GENAI_PL = "chatlab-openvino-int8", "chatlab-openvino-int8-pl", "genai-int8", "genai-int8-pl"
INT4 = ["chatlab-openvino-int4", "chatlab-openvino-int4-pl", "genai-int4", "genai-int4-pl"]
ENGINES = [GENAI, PLAIN, PL, GENAI_PL, LLAMA_CPP, *INT4]
TASKS = [*COPY_TASKS, "story"]
OUT = "data/bench/speculate-run.json"
if TYPE_CHECKING:
    from chatlab.bench.turns import Turnable


def task_targets(tasks: dict[str, Jsonable]) -> list[dict[str, Jsonable]]:
    """(what, task, engine, metric, versus, op, bound) for every target of part 1."""
    out = []
    for task in tasks:
        if task in COPY_TASKS:
            out += [("copy-heavy decode vs genai plain", task, PL, "decode_tok_s", GENAI, ">=", 1.25),
                    ("copy-heavy decode vs genai prompt lookup", task, PL, "decode_tok_s", GENAI_PL, ">=", 1.0),
                    ("TTFT unchanged vs genai plain", task, PL, "ttft_ms", GENAI, "<=", 1.0),
                    ("TTFT unchanged vs chatlab plain", task, PL, "ttft_ms", PLAIN, "<=", 1.0),
                    ("int4: decode vs genai-int4 plain", task, INT4[1], "decode_tok_s", INT4[2], ">=", 1.25),
                    ("int4: decode vs genai-int4 prompt lookup", task, INT4[1], "decode_tok_s", INT4[3], ">=", 1.0),
                    ("moonshot: int4 decode vs llama.cpp-q4_1", task, INT4[1], "decode_tok_s", LLAMA_CPP, ">=", 1.0)]
        else:
            out += [("no-copy decode vs genai plain", task, PL, "decode_tok_s", GENAI, ">=", 0.97),
                    ("no-copy decode vs chatlab plain", task, PL, "decode_tok_s", PLAIN, ">=", 0.97)]
    return [dict(zip(("what", "task", "engine", "metric", "versus", "op", "bound"), t)) for t in out]


def check(target: dict[str, Jsonable], ratio: float | None, why: str | None) -> dict[str, Jsonable]:
    if ratio is None:
        return {**target, "ratio": None, "verdict": f"NOT RUN ({why})"}
    met = ratio >= target["bound"] if target["op"] == ">=" else ratio <= target["bound"]
    return {**target, "ratio": round(ratio, 3), "verdict": "MET" if met else "MISSED"}


def judge_tasks(part: dict[str, Jsonable]) -> list[dict[str, Jsonable]]:
    """Each part-1 target with its ratio. Against the baseline the ratio is the paired one (the
    two ran interleaved); between two other engines it is the ratio of their medians."""
    rows = {r["name"]: r for r in part["engines"]}
    skipped = {s["name"]: s["reason"] for s in part["skipped"]}
    out = []
    for t in task_targets({task: None for task in part["tasks"]}):
        a, b = rows.get(t["engine"]), rows.get(t["versus"])
        if a is None or b is None:
            missing = t["engine"] if a is None else t["versus"]
            out.append(check(t, None, f"{missing}: {skipped.get(missing, 'not in this run')}"))
            continue
        cell, other = a["tasks"][t["task"]], b["tasks"][t["task"]]
        if t["versus"] == part["baseline"]:
            ratio = cell[f"{t['metric']}_ratio"]
        else:
            ratio = cell[t["metric"]] / other[t["metric"]] if other[t["metric"]] else None
        out.append(check(t, ratio, "a zero denominator"))
    return out


def judge_turns(part: dict[str, Jsonable]) -> list[dict[str, Jsonable]]:
    last = part["turns"][-1]
    target = {"what": f"turn-{last['turn']} TTFT with reuse vs genai chat mode", "task": "growing chat",
              "engine": "reuse", "metric": "ttft_ms", "versus": "genai-chat", "op": "<=", "bound": 1.0}
    return [check(target, last["reuse_ttft_ms"] / last["genai-chat_ttft_ms"], None)]


def identical_replies(part: dict[str, Jsonable]) -> dict[str, bool]:
    """Whether prompt lookup gave the plain loop's tokens on every case it ran (greedy: it must)."""
    rows = {r["name"]: r for r in part["engines"]}
    out = {}
    for plain, fast in ((PLAIN, PL), (INT4[0], INT4[1])):
        if plain in rows and fast in rows:
            out[f"{fast} == {plain}"] = rows[fast]["replies"] == rows[plain]["replies"]
    return out


def run_turns(model: str, turns: int, tokens: int, precision: str) -> dict[str, Jsonable]:
    from chatlab.bench.turns import GenaiChatMode, Turnable, growing_chat
    from chatlab.engine import load_engine

    genai_chat = GenaiChatMode(model, precision)
    engines: dict[str, Turnable] = {
        "reuse": load_engine(model, "openvino", precision=precision, reuse_prefix=True),
        "plain": load_engine(model, "openvino", precision=precision), "genai-chat": genai_chat}
    growing_chat(engines, 1, 4, start=turns)  # warm-up on another conversation, not timed
    genai_chat.restart()  # a new chat; chatlab's reuse engine also starts one
    result = growing_chat(engines, turns, tokens)
    for row in result["turns"]:
        row["reuse/plain"] = row["reuse_ttft_ms"] / row["plain_ttft_ms"]
        row["reuse/genai-chat"] = row["reuse_ttft_ms"] / row["genai-chat_ttft_ms"]
    return result


def format_report(result: dict[str, Jsonable], targets: bool = True) -> str:
    """The run as text: the engines per task, tokens per pass, the growing chat, and (unless
    `targets=False`, as a lesson prints it) each target with its ratio and verdict."""
    from chatlab.bench.report import cpu_line

    tasks = result["tasks"]
    upto = "up to " if tasks.get("stop_at_eos") else ""
    ends = ", each reply ending at its end token" if tasks.get("stop_at_eos") else ", end token ignored"
    lines = [f"{result['model']} at {tasks['precision']}: {tasks['rounds']} rounds x {upto}"
             f"{tasks['new_tokens']} new tokens per task case{ends}; {cpu_line(result.get('cpu'))}",
             f"{'engine':<28}" + "".join(f"{t + ' tok/s (x)':>22}{'TTFT ms':>9}" for t in tasks["tasks"])]
    for row in tasks["engines"]:
        cells = "".join(f"{c['decode_tok_s']:>13.1f} ({c['decode_tok_s_ratio']:.2f}x){c['ttft_ms']:>9.0f}"
                        for c in (row["tasks"][t] for t in tasks["tasks"]))
        lines.append(f"{row['name']:<28}{cells}")
    for row in tasks["engines"]:
        steps = [f"{t} {row['tasks'][t]['tokens_per_step']:.2f}" for t in tasks["tasks"]
                 if "tokens_per_step" in row["tasks"][t]]
        if steps:
            lines.append(f"{row['name']} tokens per model pass: {', '.join(steps)}")
    lines += [f"skipped {s['name']}: {s['reason']}" for s in tasks["skipped"]]
    lines += [f"greedy replies identical, {k}: {v}" for k, v in result["identical"].items()]
    lines.append("(x): ratio to the baseline " + tasks["baseline"] + "'s runs in the same pair")
    if result.get("turns"):
        lines.append("growing chat, TTFT ms: turn (prompt tokens) reuse / plain / genai chat mode")
        for r in result["turns"]["turns"]:
            lines.append(f"  turn {r['turn']} ({r['prompt_tokens']}): {r['reuse_ttft_ms']:.0f} / "
                         f"{r['plain_ttft_ms']:.0f} / {r['genai-chat_ttft_ms']:.0f}  "
                         f"reuse/plain {r['reuse/plain']:.2f}x  reuse/genai-chat {r['reuse/genai-chat']:.2f}x")
    if not targets:
        return "\n".join(lines)
    lines.append(f"{'target':<46}{'task':<14}{'ratio':>7}  {'want':<7} verdict")
    for t in result["targets"]:
        ratio = f"{t['ratio']:.2f}x" if t["ratio"] is not None else "-"
        lines.append(f"{t['what']:<46}{t['task']:<14}{ratio:>7}  {t['op']} {t['bound']:<4} {t['verdict']}")
    return "\n".join(lines)


def write_json(result: dict[str, Jsonable], path: str | Path) -> Path:
    """Written whole or not at all: a temporary file in the same folder, then renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    from chatlab.backends.precision import check_precision, cpu_info
    from chatlab.bench.sidebyside import run_tasks
    from chatlab.errors import ChatlabError
    from chatlab.evals import measured_on

    p = argparse.ArgumentParser(prog="python -m chatlab.bench.speculate_run",
                                description=(__doc__ or "").split("\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds, one case per task each")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per task case")
    p.add_argument("--turns", type=int, default=8, help="turns of the growing chat (0: skip it)")
    p.add_argument("--turn-tokens", type=int, default=16, help="reply tokens per chat turn")
    p.add_argument("--draft-tokens", type=int, default=None,
                   help="the longest guess, for every prompt-lookup row (default: chatlab's loop "
                        "guesses up to 3 tokens, every pass padded to 1+3 on OpenVINO; genai drafts 4 per pass)")
    p.add_argument("--ngram", type=int, default=None, help="the longest n-gram looked up (default 3)")
    p.add_argument("--ignore-eos", action="store_true",
                   help="time exactly --tokens per case, past the reply's end token (the shape "
                        "before session 9); by default a reply ends at its end token, as served")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated (default: all rows)")
    p.add_argument("--precision", default="f32")
    p.add_argument("--out", default=OUT, help="the JSON file to write")
    p.add_argument("--machine", default=None,
                   help="one line about the machine, quiet or shared: labels the JSON as a stored "
                        "result (chatlab.bench.stored), which notebook 05 can then print")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.tokens < 2 or args.turns < 0 or args.turn_tokens < 1:
        raise ChatlabError("--rounds and --turn-tokens must be >= 1, --tokens >= 2, --turns >= 0")
    from chatlab.generate.speculate import Speculation

    drafts = None  # each row's own default
    if args.draft_tokens is not None or args.ngram is not None:
        spec = Speculation(  # validates k and n; an option left out keeps its default
            draft_tokens=Speculation.draft_tokens if args.draft_tokens is None else args.draft_tokens,
            ngram=Speculation.ngram if args.ngram is None else args.ngram)
        drafts = {"draft_tokens": spec.draft_tokens, "ngram": spec.ngram}
    precision = check_precision(args.precision)
    tasks = run_tasks(args.model, [e for e in args.engines.split(",") if e], TASKS, args.rounds,
                      args.tokens, precision, drafts, stop_at_eos=not args.ignore_eos)
    turns = run_turns(args.model, args.turns, args.turn_tokens, precision) if args.turns else None
    result: dict[str, Jsonable] = {"model": args.model, "cpu": cpu_info(), "measured_on": measured_on(),
                              "command": " ".join(["python -m chatlab.bench.speculate_run",
                                                           *(sys.argv[1:] if argv is None else argv)]),
                              "tasks": tasks, "turns": turns, "identical": identical_replies(tasks)}
    result["targets"] = judge_tasks(tasks) + (judge_turns(turns) if turns else [])
    if args.machine:
        from chatlab.bench.stored import label

        result = label(result, result["command"], args.machine)
    print(format_report(result))
    print(f"measured on {result['measured_on']}; written to {write_json(result, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
