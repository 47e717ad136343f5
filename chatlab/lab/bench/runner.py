"""Run the engines side by side: one process each, in pairs with the baseline (`plan_groups`),
interleaved rounds in an order that rotates, medians and ranges."""
from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Protocol, TypeVar

from chatlab._thirdparty import Jsonable
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, cpu_info
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.generate.speculate import Speculation
from chatlab.lab.bench.engines import (BASELINE, ENGINES, FAST_ENGINES, SPECULATIVE_ENGINES, get_engine,
                                       unavailable)
from chatlab.lab.bench.report import add_ratios
from chatlab.lab.evals.retrieval import TASKS, task_messages
from chatlab.models import load_tokenizer


T = TypeVar("T")  # what a function run in a child returns


class Bar(Protocol):
    """The progress bar run_rounds advances (tqdm's)."""

    def update(self) -> object: ...


LONG_PROMPT_TOKENS = 1000
SHORT_QUESTION = "What are three good habits for writing maintainable Python code?"
FILLER = ("The history of the printing press shows how a technology for copying text changed who "
          "could read, what was written, and how ideas spread across Europe in a few decades. ")


@dataclass
class BenchConfig:
    model: str = "smollm2-135m-instruct"
    engines: list[str] = field(default_factory=lambda: list(ENGINES))
    rounds: int = 5
    tokens: int = 128
    long_tokens: int = 8  # new tokens on the long prompt: only its time to first token counts
    precision: str = DEFAULT_PRECISION  # the same for every engine
    task: str | None = None  # a task shape whose cases replace the short question, one per round
    # the speculative engines' drafts, {"draft_tokens": k, "ngram": n} (None: their defaults)
    speculate: dict[str, int] | None = None

    @classmethod
    def make(cls, model: str, quick: bool = False, rounds: int | None = None, tokens: int | None = None,
             engines: list[str] | None = None, precision: str | None = None, task: str | None = None,
             speculate: "Speculation | None" = None, fast: bool = False) -> "BenchConfig":
        for e in engines or []:
            get_engine(e)  # an UnknownNameError listing the registry's rows
        if rounds is not None and rounds < 1 or tokens is not None and tokens < 2:
            raise ChatlabError("--rounds must be >= 1 and --tokens >= 2")
        if task is not None and task not in TASKS:
            raise UnknownNameError("bench task", task, TASKS)
        chosen = list(engines or (FAST_ENGINES if fast else ENGINES))
        if speculate is not None and not engines:  # --speculate alone adds the speculative rows
            chosen += [e for e in SPECULATIVE_ENGINES if e not in chosen]
        drafts = None if speculate is None else {"draft_tokens": speculate.draft_tokens,
                                                 "ngram": speculate.ngram}
        return cls(model=model, engines=chosen,
                   rounds=rounds or (3 if quick else 5), tokens=tokens or (64 if quick else 128),
                   precision=check_precision(precision), task=task, speculate=drafts)


def bench_prompts(model: str, task: str | None = None) -> dict[str, Jsonable]:
    """The same ids for every engine: a short chat turn, a ~1,000-token one, and a task's `cases`."""
    from chatlab.render import resolve  # pydantic at its top: kept out of the workers, which measure their memory

    res = resolve(load_tokenizer(model), model)
    short = res.render([{"role": "user", "content": SHORT_QUESTION}]).ids
    text, long = "", short
    while len(long) < LONG_PROMPT_TOKENS:
        text += FILLER
        long = res.render([{"role": "user", "content": text + "\nSummarize the text above."}]).ids
    out: dict[str, Jsonable] = {"short": short, "long": long}
    if task is not None:
        out["cases"] = [list(res.render(messages).ids) for messages in task_messages(task)]
    return out


def prompts_in_child(model: str, task: str | None = None) -> dict[str, Jsonable]:
    """`bench_prompts` in a short-lived process: the workers' parent (a notebook's kernel) does
    not keep the torch that rendering imports."""
    return call_in_child(bench_prompts, model, task, what=f"rendering the benchmark prompts for {model!r}")


def call_in_child(function: Callable[..., T], *args: Jsonable, what: str) -> T:
    """`function(*args)` in a short-lived Python process, so that what it imports stays there;
    arguments and result go as JSON. A failure is a ChatlabError naming `what` and its stderr."""
    code = ("import importlib, json, sys; f = getattr(importlib.import_module(sys.argv[1]), sys.argv[2]); "
            "print(json.dumps(f(*json.loads(sys.argv[3]))))")
    done = subprocess.run([sys.executable, "-c", code, function.__module__, function.__qualname__,
                           json.dumps(args)], capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ChatlabError(f"{what} failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Worker:
    def __init__(self, engine: str, model: str, precision: str = DEFAULT_PRECISION,
                 speculate: dict[str, int] | None = None) -> None:
        self.engine = engine
        self.log = tempfile.TemporaryFile(mode="w+")
        extra = [json.dumps(speculate)] if speculate is not None else []
        self.proc = subprocess.Popen([sys.executable, "-m", "chatlab.lab.bench.worker", engine, model,
                                      precision, *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        ready = self.ask(None)
        self.load_s = float(ready["load_s"])
        self.precision, self.threads = ready.get("precision"), ready.get("threads")
        self.compute = ready.get("compute")  # what else decides the arithmetic, in words

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: dict[str, Jsonable] | None) -> dict[str, Jsonable]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if request is not None:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = self.log.read()[-2000:]
            raise ChatlabError(f"benchmark engine {self.engine} failed:\n{tail}")
        return json.loads(line)

    def close(self) -> float:
        rss = float(self.ask({"quit": True})["rss_mb"])
        self.proc.wait(timeout=60)
        return rss

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def plan_groups(engines: list[str], baseline: str = BASELINE) -> list[list[str]]:
    """Which engines are alive together: each in a pair with the anchor (the baseline, or the first
    engine), to keep within Binder's 2 GB while every ratio compares two interleaved engines."""
    if len(engines) <= 1:
        return [list(engines)] if engines else []
    anchor = baseline if baseline in engines else engines[0]
    return [[anchor, e] for e in engines if e != anchor]


class Samples:
    """Per-engine timings, and the anchor's timings per pair (the ratio's denominator)."""

    def __init__(self) -> None:
        self.all: dict[str, dict[str, list[float]]] = {}
        self.paired: dict[str, dict[str, list[float]]] = {}  # partner -> the anchor's samples

    def add(self, engine: str, short: dict[str, Jsonable], long: dict[str, Jsonable],
            partner: str | None = None) -> None:
        for store, key in ((self.all, engine), (self.paired, partner)):
            if key is not None:
                s = store.setdefault(key, {"decode_tok_s": [], "ttft_ms": [], "ttft_long_ms": []})
                add_answer(s, short)
                s["ttft_long_ms"].append(long["ttft_s"] * 1000)


def add_answer(s: dict[str, list[float]], answer: dict[str, Jsonable]) -> None:
    """One timed reply into `s`: decode speed, TTFT, and a speculative engine's passes."""
    s["decode_tok_s"].append(answer["decode_tok_s"])
    s["ttft_ms"].append(answer["ttft_s"] * 1000)
    if answer.get("spec"):  # tokens per model pass, share of drafted tokens accepted
        s.setdefault("tokens_per_step", []).append(answer["spec"]["tokens_per_step"])
        s.setdefault("acceptance", []).append(answer["spec"]["acceptance"])


class EngineFailed(ChatlabError):
    """A partner engine's process failed mid-run: the run goes on without that row."""

    def __init__(self, engine: str, message: str, returncode: int | None) -> None:
        last = [line for line in message.splitlines() if line.strip()][-1:] or [message]
        how = ""
        if returncode is not None and returncode < 0:
            how = f" (killed by {signal.Signals(-returncode).name})"
        elif returncode:
            how = f" (exit status {returncode})"
        super().__init__(f"{engine} failed during the run{how}: {last[0]}")
        self.engine = engine


def run_rounds(group: list[str], model: str, precision: str, speculate: dict[str, int] | None, rounds: int,
               warm: list[dict[str, Jsonable]], turn: Callable[[str, Worker, int, str | None], object],
               info: dict[str, dict[str, Jsonable]], bar: "Bar", make_worker: "Callable[..., Worker] | None",
               partner_fails: bool = False) -> int:
    """Start the group's workers, ask each the `warm` requests untimed, call `turn(engine, worker,
    round, partner)` (`partner`: the anchor's, on the anchor's turn) in rounds whose order rotates,
    close them; returns how many were alive at once. `info` keeps each engine's first load time,
    arithmetic and peak memory over its groups; `partner_fails`: a partner's error is EngineFailed."""
    workers: dict[str, Worker] = {}
    try:
        for current in group:
            drafts = [speculate] if speculate is not None and get_engine(current).takes_drafts else []
            w = workers[current] = (make_worker or Worker)(current, model, precision, *drafts)
            for request in warm:
                w.ask(request)
            row = info.setdefault(current, {"rss_mb": 0.0, "load_s": w.load_s})
            row.update(precision=w.precision, threads=w.threads, compute=w.compute)
        alive = sum(1 for w in workers.values() if w.alive())
        for r in range(rounds):
            shift = r % len(group)  # rotate who goes first: no engine always runs after the other
            for current in group[shift:] + group[:shift]:
                partner = group[1] if current == group[0] and len(group) > 1 else None
                turn(current, workers[current], r, partner)
                bar.update()
        for current, w in workers.items():
            info[current]["rss_mb"] = max(info[current]["rss_mb"], w.close())
    except ChatlabError as err:
        if not partner_fails or current == group[0]:  # the baseline: no ratio can be taken without it
            raise
        code = workers[current].proc.poll() if current in workers else None
        raise EngineFailed(current, str(err), code) from err
    finally:
        for w in workers.values():
            w.kill()
    return alive


def run_benchmark(config: BenchConfig, progress: bool = True,
                  make_worker: "Callable[..., Worker] | None" = None) -> dict[str, Jsonable]:
    """Run the engines pair by pair; those that cannot run here are listed under `skipped`."""
    from tqdm.auto import tqdm

    skipped = [{"name": e, "reason": why} for e in config.engines
               if (why := unavailable(e, config.precision))]
    engines = [e for e in config.engines if e not in {s["name"] for s in skipped}]
    if not engines:
        raise ChatlabError("no benchmark engine can run here: " +
                           "; ".join(f"{s['name']}: {s['reason']}" for s in skipped))
    prompts = prompts_in_child(config.model, config.task)
    cases: list[Jsonable] = prompts.get("cases") or [prompts["short"]]
    groups = plan_groups(engines)
    samples, info = Samples(), dict[str, dict[str, Jsonable]]()

    def turn(e: str, w: Worker, r: int, partner: str | None) -> None:
        short = w.ask({"ids": cases[r % len(cases)], "tokens": config.tokens})
        samples.add(e, short, w.ask({"ids": prompts["long"], "tokens": config.long_tokens}), partner)
        info[e].setdefault("first_tokens", short["tokens"][:16])

    # untimed warm-up on both shapes: first-shape allocations, cache blocks for the long prompt
    warm = [{"ids": prompts["short"], "tokens": 4}, {"ids": prompts["long"], "tokens": 2}]
    steps = config.rounds * sum(len(g) for g in groups)
    with tqdm(total=steps, desc="engine pairs, interleaved rounds", disable=not progress) as bar:
        max_alive = max(run_rounds(group, config.model, config.precision, config.speculate, config.rounds,
                                   warm, turn, info, bar, make_worker) for group in groups)
    rows = []
    for e in engines:
        row: dict[str, Jsonable] = {"name": e}
        for metric, values in samples.all[e].items():
            row[metric] = statistics.median(values)
            row[f"{metric}_range"] = (min(values), max(values))
        if e in samples.paired:  # the anchor's medians in this engine's own pair
            row["paired_anchor"] = {m: statistics.median(v) for m, v in samples.paired[e].items()
                                    if m in ("decode_tok_s", "ttft_ms", "ttft_long_ms")}
        row.update(info[e])
        rows.append(row)
    result = {"model": config.model, "rounds": config.rounds, "new_tokens": config.tokens,
              "prompt_tokens": {"short": len(prompts["short"]), "long": len(prompts["long"])},
              "task": config.task, "speculate": config.speculate,
              "baseline": groups[0][0], "precision": config.precision, "cpu": cpu_info(),
              "schedule": "pairs with the baseline, interleaved rounds",
              "max_workers_alive": max_alive, "engines": rows, "skipped": skipped}
    add_ratios(result)
    return result
