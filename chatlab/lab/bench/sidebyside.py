"""Every task shape in one bench run: each engine paired with the baseline, one case of each task
per turn, so a pair loads once for all the tasks and each ratio compares runs seconds apart."""
from __future__ import annotations

import statistics
from typing import Callable

from chatlab._thirdparty import Jsonable
from chatlab.lab.bench import engines as bench_engines
from chatlab.lab.bench.engines import BASELINE
from chatlab.lab.bench.runner import EngineFailed, Worker, add_answer, call_in_child, plan_groups, run_rounds
from chatlab.lab.evals.retrieval import task_messages
from chatlab.models import load_tokenizer
from chatlab.render import resolve

METRICS = ("decode_tok_s", "ttft_ms", "tokens_per_step", "acceptance")


def task_cases(model: str, tasks: list[str], limit: int) -> dict[str, list[list[int]]]:
    """The first `limit` cases of each task, rendered to ids as the bench renders them."""
    res = resolve(load_tokenizer(model), model)
    return {t: [list(res.render(m).ids) for m in task_messages(t)[:limit]] for t in tasks}


def task_cases_in_child(model: str, tasks: list[str], limit: int) -> dict[str, list[list[int]]]:
    """`task_cases` in a short-lived process (rendering imports torch; the parent needs ids only)."""
    return call_in_child(task_cases, model, list(tasks), limit, what=f"rendering the task prompts for {model!r}")


class TaskSamples:
    """Per engine and task: its own samples, and the baseline's samples from its pair."""

    def __init__(self) -> None:
        self.own: dict[str, dict[str, dict[str, list[float]]]] = {}
        self.anchor: dict[str, dict[str, dict[str, list[float]]]] = {}
        self.tokens: dict[str, dict[str, dict[int, list[int]]]] = {}  # each case's reply, once

    def add(self, store: dict[str, dict[str, dict[str, list[float]]]], engine: str, task: str,
            answer: dict[str, Jsonable]) -> None:
        add_answer(store.setdefault(engine, {}).setdefault(task, {m: [] for m in METRICS}), answer)


def run_tasks(model: str, engines: list[str], tasks: list[str], rounds: int, tokens: int,
              precision: str = "f32", speculate: dict[str, int] | None = None,
              progress: bool = True, make_worker: "Callable[..., Worker] | None" = None,
              stop_at_eos: bool = False) -> dict[str, Jsonable]:
    """Each engine per task: medians, ranges, the paired ratio; `stop_at_eos`: replies end as served."""
    from tqdm.auto import tqdm

    skipped = [{"name": e, "reason": why} for e in engines if (why := bench_engines.unavailable(e, precision))]
    runnable = [e for e in engines if e not in {s["name"] for s in skipped}]
    cases = task_cases_in_child(model, tasks, rounds)
    groups = plan_groups(runnable)
    samples, info = TaskSamples(), dict[str, dict[str, Jsonable]]()

    def turn(e: str, w: Worker, r: int, partner: str | None) -> None:  # one case of every task
        for task, task_cases_ in cases.items():
            i = r % len(task_cases_)
            answer = w.ask({"ids": task_cases_[i], "tokens": tokens, "stop_at_eos": stop_at_eos})
            samples.add(samples.anchor if partner else samples.own, partner or e, task, answer)
            samples.tokens.setdefault(e, {}).setdefault(task, {}).setdefault(i, answer["tokens"])

    warm = [{"ids": max(c, key=len), "tokens": 4} for c in cases.values()]  # first-shape allocations
    with tqdm(total=rounds * sum(len(g) for g in groups), desc="engine pairs, all tasks",
              disable=not progress) as bar:
        for group in groups:  # the baseline first
            try:
                run_rounds(group, model, precision, speculate, rounds, warm, turn, info, bar, make_worker,
                           partner_fails=True)
            except EngineFailed as failed:  # its row is left out, with the reason, not the run
                skipped.append({"name": failed.engine, "reason": str(failed)})
                for store in (samples.own, samples.anchor, samples.tokens, info):
                    store.pop(failed.engine, None)
    baseline = groups[0][0] if runnable else BASELINE
    rows = []
    for e in [e for e in runnable if e not in {s["name"] for s in skipped}]:
        per_task = {}
        for task in tasks:
            own = samples.own.get(e, {}).get(task)
            if own is None and e == baseline:  # the baseline: all its pairs' runs together
                own = {m: [v for partner in samples.anchor.values() for v in partner[task][m]]
                       for m in METRICS}
            assert own is not None
            cell: dict[str, Jsonable] = {}
            for metric, values in own.items():
                if values:
                    cell[metric] = statistics.median(values)
                    cell[f"{metric}_range"] = (min(values), max(values))
            anchor = samples.anchor.get(e, {}).get(task)
            for metric in ("decode_tok_s", "ttft_ms"):
                cell[f"{metric}_ratio"] = cell[metric] / statistics.median(anchor[metric]) if anchor else 1.0
            per_task[task] = cell
        rows.append({"name": e, "tasks": per_task, "replies": samples.tokens.get(e, {}), **info[e]})
    return {"model": model, "rounds": rounds, "new_tokens": tokens, "stop_at_eos": stop_at_eos, "tasks": tasks,
            "prompt_tokens": {t: [len(c) for c in cs] for t, cs in cases.items()},
            "baseline": baseline, "precision": precision, "speculate": speculate,
            "engines": rows, "skipped": skipped}
