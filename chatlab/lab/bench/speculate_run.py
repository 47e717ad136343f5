"""`chatlab bench speculate`: part 1 times the task shapes side by side, plain and with prompt
lookup; part 2 the turns of a growing chat with and without prefix reuse; each target is judged."""
from __future__ import annotations

import json
from dataclasses import dataclass

from chatlab._thirdparty import Jsonable
from chatlab.backends.precision import check_precision, cpu_info
from chatlab.data import data_dir
from chatlab.engine import load_engine
from chatlab.errors import ChatlabError
from chatlab.generate.speculate import Speculation
from chatlab.lab.bench.engines import FAST_ENGINES
from chatlab.lab.bench.llamacpp import ENGINE as LLAMA_CPP
from chatlab.lab.bench.replay import REPLIES, oracle, until_end
from chatlab.lab.bench.report import BOUNDED_TASKS, cpu_line, label, write_json
from chatlab.lab.bench.sidebyside import run_tasks
from chatlab.lab.bench.turns import GenaiChatMode, Turnable, growing_chat
from chatlab.lab.evals import measured_on
from chatlab.lab.evals.retrieval import COPY_TASKS, TASKS

PLAIN, PL, GENAI, GENAI_PL = "chatlab-openvino-int8", "chatlab-openvino-int8-pl", "genai-int8", "genai-int8-pl"
INT4 = ["chatlab-openvino-int4", "chatlab-openvino-int4-pl", "genai-int4", "genai-int4-pl"]
SIDE_BY_SIDE = [GENAI, PLAIN, PL, GENAI_PL, LLAMA_CPP, *INT4]
# --fast: the fast profile on chatlab's loop and on genai, beside llama.cpp
FAST, FAST_PL, GENAI_FAST = "chatlab-fast", "chatlab-fast-pl", "genai-fast"
OUT = "data/bench/speculate-run.json"


def task_targets(tasks: list[str], fast: bool = False) -> list[dict[str, Jsonable]]:
    """Every target of part 1, (what, task, engine, metric, versus, op, bound); with `fast` the fast
    profile's moonshot: llama.cpp q4_1's decode at half its TTFT, and genai's on the same settings."""
    out = []
    for task in tasks:
        if fast:
            out += [("fast: decode vs llama.cpp-q4_1", task, FAST, "decode_tok_s", LLAMA_CPP, ">=", 1.0),
                    ("fast: TTFT vs llama.cpp-q4_1", task, FAST, "ttft_ms", LLAMA_CPP, "<=", 0.5),
                    ("fast: decode vs genai, same settings", task, FAST, "decode_tok_s", GENAI_FAST,
                     ">=", 1.0)]
            if task in COPY_TASKS:
                out.append(("fast + prompt lookup: decode vs llama.cpp", task, FAST_PL, "decode_tok_s",
                            LLAMA_CPP, ">=", 1.0))
        elif task in COPY_TASKS:
            if task not in BOUNDED_TASKS:
                out += [("copy-heavy decode vs genai plain", task, PL, "decode_tok_s", GENAI, ">=", 1.25),
                        ("int4: decode vs genai-int4 plain", task, INT4[1], "decode_tok_s", INT4[2], ">=", 1.25)]
            out += [("copy-heavy decode vs genai prompt lookup", task, PL, "decode_tok_s", GENAI_PL, ">=", 1.0),
                    ("TTFT unchanged vs genai plain", task, PL, "ttft_ms", GENAI, "<=", 1.0),
                    ("TTFT unchanged vs chatlab plain", task, PL, "ttft_ms", PLAIN, "<=", 1.0),
                    ("int4: decode vs genai-int4 prompt lookup", task, INT4[1], "decode_tok_s", INT4[3], ">=", 1.0),
                    ("moonshot: int4 decode vs llama.cpp-q4_1", task, INT4[1], "decode_tok_s", LLAMA_CPP, ">=", 1.0)]
        else:
            out += [("no-copy decode vs genai plain", task, PL, "decode_tok_s", GENAI, ">=", 0.97),
                    ("no-copy decode vs chatlab plain", task, PL, "decode_tok_s", PLAIN, ">=", 0.97)]
    return [dict(zip(("what", "task", "engine", "metric", "versus", "op", "bound"), t)) for t in out]


def _judged(target: dict[str, Jsonable], ratio: float | None, why: str | None) -> dict[str, Jsonable]:
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
    fast = FAST in part.get("engines_asked", []) or any(r["name"] == FAST for r in part["engines"])
    for t in task_targets(part["tasks"], fast):
        a, b = rows.get(t["engine"]), rows.get(t["versus"])
        if a is None or b is None:
            missing = t["engine"] if a is None else t["versus"]
            out.append(_judged(t, None, f"{missing}: {skipped.get(missing, 'not in this run')}"))
            continue
        cell, other = a["tasks"][t["task"]], b["tasks"][t["task"]]
        if t["versus"] == part["baseline"]:
            ratio = cell[f"{t['metric']}_ratio"]
        else:
            ratio = cell[t["metric"]] / other[t["metric"]] if other[t["metric"]] else None
        out.append(_judged(t, ratio, "a zero denominator"))
    return out


def judge_turns(part: dict[str, Jsonable]) -> list[dict[str, Jsonable]]:
    last = part["turns"][-1]
    target = {"what": f"turn-{last['turn']} TTFT with reuse vs genai chat mode", "task": "growing chat",
              "engine": "reuse", "metric": "ttft_ms", "versus": "genai-chat", "op": "<=", "bound": 1.0}
    return [_judged(target, last["reuse_ttft_ms"] / last["genai-chat_ttft_ms"], None)]


def identical_replies(part: dict[str, Jsonable]) -> dict[str, bool]:
    """Whether prompt lookup gave the plain loop's tokens on every case it ran (greedy: it must)."""
    rows = {r["name"]: r for r in part["engines"]}
    out = {}
    for plain, fast in ((PLAIN, PL), (INT4[0], INT4[1])):
        if plain in rows and fast in rows:
            out[f"{fast} == {plain}"] = rows[fast]["replies"] == rows[plain]["replies"]
    return out


def oracle_bounds(part: dict[str, Jsonable],
                  replies: dict[str, list[dict[str, list[int]]]] | None) -> dict[str, dict[str, Jsonable]]:
    """Per copy-heavy task: prompt lookup's measured speed-up over chatlab plain beside an oracle
    drafter's bound on the recorded replies (None where a row or the recording is missing)."""
    rows = {r["name"]: r for r in part["engines"]}
    out: dict[str, dict[str, Jsonable]] = {}
    for task in part["tasks"]:
        if task not in COPY_TASKS:
            continue
        measured = None
        pair = next(((pl, plain) for pl, plain in ((PL, PLAIN), (FAST_PL, FAST)) if pl in rows and plain in rows),
                    None)  # the int8 rows, or in a --fast run the fast profile's
        if pair is not None:
            a, b = (rows[name]["tasks"][task]["decode_tok_s"] for name in pair)
            measured = a / b if b else None
        cases = (replies or {}).get(task, [])[:part["rounds"]]
        bound = (sum(oracle(c["prompt"], until_end(c["reply"])) for c in cases) / len(cases)
                 if cases else None)
        out[task] = {"measured_vs_chatlab_plain": measured, "oracle_bound": bound, "cases": len(cases)}
    return out


def recorded_replies() -> dict[str, list[dict[str, list[int]]]] | None:
    """The greedy replies `chatlab bench replay --record` stored, or None."""
    path = data_dir().joinpath(*REPLIES)
    return json.loads(path.read_text()) if path.is_file() else None


def run_turns(model: str, turns: int, tokens: int, precision: str) -> dict[str, Jsonable]:
    engines: dict[str, Turnable] = {
        "reuse": load_engine(model, "openvino", precision=precision, reuse_prefix=True),
        "plain": load_engine(model, "openvino", precision=precision),
        "genai-chat": GenaiChatMode(model, precision)}
    return growing_chat(engines, turns, tokens, [("reuse", "plain"), ("reuse", "genai-chat")])


def format_report(result: dict[str, Jsonable], targets: bool = True) -> str:
    """The run as text; `targets=False` (as a lesson prints it) leaves out the verdicts."""
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
    lines += [f"{row['name']}: {row.get('precision')}, {row.get('compute') or 'compute not reported'}"
              for row in tasks["engines"] if row.get("compute")]
    lines += [f"skipped {s['name']}: {s['reason']}" for s in tasks["skipped"]]
    lines += [f"greedy replies identical, {k}: {v}" for k, v in result["identical"].items()]
    lines.append("(x): ratio to the baseline " + tasks["baseline"] + "'s runs in the same pair")
    if bounds := result.get("oracle"):
        lines.append("prompt lookup over chatlab plain, measured / oracle bound (an n-gram drafter "
                     "that never guesses wrong, replayed on the recorded replies of the cases timed):")
        for task, b in bounds.items():
            got = "-" if b["measured_vs_chatlab_plain"] is None else f"{b['measured_vs_chatlab_plain']:.2f}x"
            bound = ("no recorded replies" if b["oracle_bound"] is None
                     else f"{b['oracle_bound']:.2f}x over {b['cases']} cases")
            lines.append(f"  {task}: {got} / {bound}")
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


@dataclass(frozen=True)
class SpeculateRun:
    """`rounds` interleaved rounds of `tokens` per task case, then `turns` of a growing chat (none with
    `fast`); `draft_tokens` and `ngram` set every prompt-lookup row's drafter (None: its default)."""

    model: str = "smollm2-135m-instruct"
    rounds: int = 3
    tokens: int = 64
    turns: int = 8
    turn_tokens: int = 16
    draft_tokens: int | None = None
    ngram: int | None = None
    ignore_eos: bool = False
    engines: tuple[str, ...] | None = None
    fast: bool = False
    precision: str = "f32"
    out: str = OUT
    machine: str | None = None
    command: str = "chatlab bench speculate"


def run(args: SpeculateRun) -> dict[str, Jsonable]:
    """Time, judge, print and write the JSON; bad sizes are refused before anything loads."""
    if args.rounds < 1 or args.tokens < 2 or args.turns < 0 or args.turn_tokens < 1:
        raise ChatlabError("--rounds and --turn-tokens must be >= 1, --tokens >= 2, --turns >= 0")
    drafts = None  # each row's own default
    if args.draft_tokens is not None or args.ngram is not None:
        spec = Speculation(  # validates k and n; an option left out keeps its default
            draft_tokens=Speculation.draft_tokens if args.draft_tokens is None else args.draft_tokens,
            ngram=Speculation.ngram if args.ngram is None else args.ngram)
        drafts = {"draft_tokens": spec.draft_tokens, "ngram": spec.ngram}
    precision = check_precision(args.precision)
    names = [e for e in (args.engines or (FAST_ENGINES if args.fast else SIDE_BY_SIDE)) if e]
    tasks = run_tasks(args.model, names, TASKS, args.rounds, args.tokens, precision, drafts,
                      stop_at_eos=not args.ignore_eos)
    tasks["engines_asked"] = names
    turns = run_turns(args.model, args.turns, args.turn_tokens, precision) if args.turns and not args.fast else None
    result: dict[str, Jsonable] = {"model": args.model, "cpu": cpu_info(), "measured_on": measured_on(),
                                   "command": args.command, "tasks": tasks, "turns": turns,
                                   "identical": identical_replies(tasks),
                                   "oracle": oracle_bounds(tasks, recorded_replies())}
    result["targets"] = judge_tasks(tasks) + (judge_turns(turns) if turns else [])
    if args.machine:
        result = label(result, result["command"], args.machine)
    print(format_report(result))
    print(f"measured on {result['measured_on']}; written to {write_json(result, args.out)}")
    return result
