"""`chatlab bench accuracy`: what the fast profile costs in answers, against the exact default on
the same prompts: per case the tokens shared before the first difference and both replies' scores."""
from __future__ import annotations

import json
import re
import statistics
from typing import Callable

from chatlab._thirdparty import Jsonable
from chatlab.backends import load_step_backend
from chatlab.backends.precision import compute_line, cpu_info
from chatlab.errors import ChatlabError
from chatlab.generate import Finished, SamplingParams, generate
from chatlab.lab.evals import (answer_has_key, contains, load_dogs, load_facts, load_questions, measured_on,
                               score_dog)
from chatlab.lab.evals.retrieval import TASKS, task_messages
from chatlab.lab.finetune import first_difference
from chatlab.protocols import StepBackend
from chatlab.render import resolve

PROFILES = ("exact", "fast")  # chatlab's loop on OpenVINO: the int8/f32 default, or the fast profile


def prompts(limit: int | None) -> dict[str, list[list[dict[str, str]]]]:
    """The message lists per set: the bench's tasks and 01's facts, the first `limit` of each."""
    out = {task: task_messages(task)[:limit] for task in TASKS}
    out["facts"] = [[{"role": "user", "content": f.question}] for f in load_facts()[:limit]]
    return out


def replies(backend: StepBackend, model: str, sets: dict[str, list[list[dict[str, str]]]],
            tokens: int) -> dict[str, list[dict[str, Jsonable]]]:
    """Greedy replies (ending at the end token, at most `tokens`): ids, text, decode speed."""
    res = resolve(backend.tokenizer, model)
    out: dict[str, list[dict[str, Jsonable]]] = {}
    for name, cases in sets.items():
        out[name] = []
        for messages in cases:
            *_, fin = generate(backend, list(res.render(messages).ids), SamplingParams(max_new_tokens=tokens))
            assert isinstance(fin, Finished)
            ttft, total = fin.timings["ttft_s"], fin.timings["total_s"]
            speed = (fin.completion_tokens - 1) / (total - ttft) if fin.completion_tokens > 1 and total > ttft else 0.0
            out[name].append({"ids": list(fin.token_ids), "text": fin.text, "decode_tok_s": speed})
    return out


def agreement(exact: list[dict[str, Jsonable]], fast: list[dict[str, Jsonable]]) -> dict[str, Jsonable]:
    """Per set: cases identical, and the tokens shared before the first difference (mean, min)."""
    shared = []
    identical = 0
    for e, f in zip(exact, fast):
        at = first_difference(e["ids"], f["ids"])
        identical += at is None
        shared.append(len(e["ids"]) if at is None else at)
    return {"cases": len(shared), "identical": identical,
            "mean_tokens_to_difference": statistics.mean(shared) if shared else None,
            "min_tokens_to_difference": min(shared) if shared else None}


def first_json(text: str) -> object:
    """The first {...} object in a reply, or None."""
    for match in re.finditer(r"\{[^{}]*\}", text):
        try:
            return json.loads(match.group(0))
        except ValueError:
            continue
    return None


def scores(got: dict[str, list[dict[str, Jsonable]]], limit: int | None) -> dict[str, list[int]]:
    """[right, scored] per eval set, from the replies to its cases."""
    checks: dict[str, tuple[str, Callable[[list[str]], int]]] = {
        "extract": ("extraction (07)", lambda texts: sum(
            score_dog(c, first_json(t)).ok for c, t in zip(load_dogs()[:limit], texts))),
        "rag": ("key phrases (08)", lambda texts: sum(
            answer_has_key(t, q) for q, t in zip(load_questions()[:limit], texts))),
        "facts": ("facts (01)", lambda texts: sum(
            any(contains(t, a) for a in f.answer) for f, t in zip(load_facts()[:limit], texts)))}
    return {label: [right([str(r["text"]) for r in got[name]]), len(got[name])]
            for name, (label, right) in checks.items() if name in got}


def measure(model: str = "smollm2-135m-instruct", limit: int | None = None,
            tokens: int = 64) -> dict[str, Jsonable]:
    """Both profiles over the sets (the first `limit` cases of each): agreement, scores, speed."""
    if tokens < 2 or (limit is not None and limit < 1):
        raise ChatlabError("--tokens must be >= 2 and --limit >= 1")
    sets = prompts(limit)
    got, compute = {}, {}
    for profile in PROFILES:
        backend = load_step_backend(model, "openvino", fast=profile == "fast")
        compute[profile] = compute_line(backend)
        got[profile] = replies(backend, model, sets, tokens)
        del backend
    return {
        "model": model, "tokens": tokens, "limit": limit, "cpu": cpu_info(), "measured_on": measured_on(),
        "compute": compute,
        "agreement": {name: agreement(got["exact"][name], got["fast"][name]) for name in sets},
        "scores": {p: scores(got[p], limit) for p in PROFILES},
        "decode_tok_s": {p: statistics.median(r["decode_tok_s"] for rs in got[p].values() for r in rs)
                         for p in PROFILES}}


def format_report(result: dict[str, Jsonable]) -> str:
    lines = [f"{result['model']}: exact vs fast, greedy, up to {result['tokens']} tokens per reply; "
             f"{result['measured_on']}"]
    lines += [f"  {p}: {result['compute'][p]}" for p in PROFILES]
    lines.append(f"{'set':<10}{'identical':>12}{'tokens to 1st difference (mean, min)':>40}")
    for name, a in result["agreement"].items():
        mean = "-" if a["mean_tokens_to_difference"] is None else f"{a['mean_tokens_to_difference']:.1f}"
        lines.append(f"{name:<10}{a['identical']:>6} of {a['cases']:<4}{mean:>28}, {a['min_tokens_to_difference']}")
    lines.append(f"{'eval':<20}{'exact':>10}{'fast':>10}")
    for name in result["scores"]["exact"]:
        e, f = result["scores"]["exact"][name], result["scores"]["fast"][name]
        lines.append(f"{name:<20}{e[0]:>6}/{e[1]:<3}{f[0]:>6}/{f[1]:<3}")
    speed = result["decode_tok_s"]
    lines.append(f"decode tok/s (median over the replies, not interleaved): exact {speed['exact']:.1f}, "
                 f"fast {speed['fast']:.1f}")
    return "\n".join(lines)


def trade_table(result: dict[str, Jsonable]) -> str:
    """Exact vs fast in three columns a learner can weigh: decode speed, the first differing
    token (mean and earliest over every case), and each eval set's score."""
    agree = list(result["agreement"].values())
    cases = sum(a["cases"] for a in agree)
    mean = sum(a["mean_tokens_to_difference"] * a["cases"] for a in agree) / cases if cases else 0.0
    first = min(a["min_tokens_to_difference"] for a in agree) if agree else 0
    same = sum(a["identical"] for a in agree)
    evals = list(result["scores"]["exact"])
    lines = [f"{'profile':<8}{'decode tok/s':>13}  {'first differing token':<28}"
             + "".join(f"{e:>18}" for e in evals)]
    for p in PROFILES:
        diff = "(the reference)" if p == "exact" else f"mean {mean:.1f}, earliest {first}; {same}/{cases} same"
        scored = "".join(f"{f'{r}/{n}':>18}" for r, n in (result["scores"][p][e] for e in evals))
        lines.append(f"{p:<8}{result['decode_tok_s'][p]:>13.1f}  {diff:<28}{scored}")
    return "\n".join(lines)
