"""Tune a drafter without timing it: replay recorded greedy replies through prompt lookup. Greedy
speculation changes only the number of model passes, so the plain reply says which guesses pass."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from chatlab.backends import load_step_backend
from chatlab.data import data_dir
from chatlab.errors import ChatlabError
from chatlab.generate import SamplingParams, generate
from chatlab.generate.speculate import PromptLookup, Speculation
from chatlab.lab.bench.report import write_json
from chatlab.lab.evals.retrieval import TASKS, task_messages
from chatlab.render import resolve

# Decode steps per verify pass over 1 + k tokens: SmolLM2-135M int8, paged graph, f32 (docs/benchmarks.md,
# "Measured step by step"), the loop's Python left out. From k=4 the CPU plugin takes another matmul kernel.
PASS_COST = {0: 1.0, 1: 1.2, 2: 1.3, 3: 1.4, 4: 2.1, 8: 2.5, 12: 2.85}
REPLIES = ("bench", "greedy-replies.json")  # inside the data folder
# SmolLM2's end tokens (<|endoftext|>, <|im_end|>): the recorded replies run 64 tokens past them
END_IDS = (0, 2)


def pass_cost(k: int) -> float:
    """Steps one pass over 1 + k tokens costs: PASS_COST interpolated, extrapolated past its last k."""
    table, ks = PASS_COST, sorted(PASS_COST)
    if k >= ks[-1]:
        slope = (table[ks[-1]] - table[ks[-2]]) / (ks[-1] - ks[-2])
        return table[ks[-1]] + slope * (k - ks[-1])
    lo = max(x for x in ks if x <= k)
    hi = min(x for x in ks if x >= k)
    return table[lo] if lo == hi else table[lo] + (table[hi] - table[lo]) * (k - lo) / (hi - lo)


def replay_passes(prompt: list[int], reply: list[int], spec: Speculation,
                  fixed_width: bool = False) -> list[int]:
    """The guess length of each pass after the prefill (0: a plain step) `spec` would make on a recorded
    greedy reply, driving PromptLookup as chatlab.generate.loop does (`fixed_width`: padded passes)."""
    lookup = PromptLookup(spec, prompt, fixed_width)
    lookup.add(reply[0])  # the first token comes from the prefill, in both loops
    n, passes = 1, []
    while n < len(reply):
        draft = lookup.draft(len(reply) - n - 1)
        passes.append(len(draft))
        kept = 0
        while kept < len(draft) and draft[kept] == reply[n + kept]:
            kept += 1
        for token in reply[n:n + kept + 1]:  # the kept guesses and the model's own next token
            lookup.add(token)
        n += kept + 1
        if draft:
            lookup.result(len(draft), kept)
    return passes


def replay(prompt: list[int], reply: list[int], spec: Speculation, fixed_width: bool = False) -> float:
    """Modelled decode speed of `spec` over plain decoding on one recorded greedy reply (`fixed_width`:
    every verify pass costs one over 1 + k tokens, however short its guess)."""
    if len(reply) < 2:
        return 1.0
    passes = replay_passes(prompt, reply, spec, fixed_width)
    cost = sum(pass_cost(spec.draft_tokens if fixed_width and k else k) for k in passes)
    return (len(reply) - 1) / cost


def until_end(reply: list[int]) -> list[int]:
    """The reply up to and including its first end token, as a served reply stops."""
    for i, token in enumerate(reply):
        if token in END_IDS:
            return reply[:i + 1]
    return reply


def replay_tasks(replies: dict[str, list[dict[str, list[int]]]], spec: Speculation,
                 fixed_width: bool = False, stop_at_end: bool = True) -> dict[str, float]:
    """Mean modelled speed-up per task over its recorded cases; each reply cut at its end token
    (as the speculation bench and a server stop) unless `stop_at_end` is False."""
    cut = until_end if stop_at_end else list
    return {task: statistics.mean(replay(c["prompt"], cut(c["reply"]), spec, fixed_width) for c in cases)
            for task, cases in replies.items()}


def oracle(prompt: list[int], reply: list[int], k: int = 3) -> float:
    """A bound on any n-gram lookup drafter with guesses of up to `k`: at each pass it drafts from
    the earlier occurrence whose continuation matches the reply longest, and only when kept."""
    if len(reply) < 2:
        return 1.0
    ids, n, cost = list(prompt) + [reply[0]], 1, 0.0
    while n < len(reply):
        best = 0
        for j in range(len(ids) - 1):
            if ids[j] == ids[-1]:
                m = 0
                while m < k and j + 1 + m < len(ids) and n + m < len(reply) and ids[j + 1 + m] == reply[n + m]:
                    m += 1
                best = max(best, m)
        cost += pass_cost(k) if best else 1.0
        ids += reply[n:n + best + 1]
        n += best + 1
    return (len(reply) - 1) / cost


def oracle_tasks(replies: dict[str, list[dict[str, list[int]]]], k: int = 3,
                 stop_at_end: bool = True) -> dict[str, float]:
    """`oracle` per task, the mean over its recorded cases (cut at their end token by default)."""
    cut = until_end if stop_at_end else list
    return {task: statistics.mean(oracle(c["prompt"], cut(c["reply"]), k) for c in cases)
            for task, cases in replies.items()}


def record(model: str = "smollm2-135m-instruct", tokens: int = 64) -> dict[str, list[dict[str, list[int]]]]:
    """Greedy replies `tokens` long, past the end token, to every bench task's cases (int8 at f32)."""
    backend = load_step_backend(model, "openvino", "int8", precision="f32")
    res = resolve(backend.tokenizer, model)
    out: dict[str, list[dict[str, list[int]]]] = {}
    for task in TASKS:
        out[task] = []
        for messages in task_messages(task):
            ids = list(res.render(messages).ids)
            *_, fin = generate(backend, ids, SamplingParams(max_new_tokens=tokens, ignore_eos=True))
            out[task].append({"prompt": ids, "reply": list(fin.token_ids)})
    return out


# name -> (the drafter's settings, whether every verify pass is padded to 1 + k tokens)
POLICIES: dict[str, tuple[Speculation, bool]] = {
    "k=4 every pass, n-grams 3..1, no adapting": (Speculation(draft_tokens=4, min_ngram=1, adaptive=False), False),
    "sized guesses up to 8, n-grams 3..2": (Speculation(draft_tokens=8), False),
    "sized guesses up to 3, n-grams 3..2 (torch)": (Speculation(), False),
    "padded to 1+2 on a verify graph": (Speculation(draft_tokens=2), True),
    "padded to 1+3 on a verify graph (OpenVINO)": (Speculation(), True),
    "padded to 1+4 on a verify graph": (Speculation(draft_tokens=4), True),
}


def run(file: str | None = None, record_first: bool = False, past_end: bool = False) -> None:
    """Print each policy's modelled speed per task and the oracle's bound, from the recorded replies."""
    path = Path(file) if file else data_dir().joinpath(*REPLIES)
    if record_first:
        print(f"written to {write_json(record(), path)}")  # whole or not at all
    if not path.is_file():
        raise ChatlabError(f"no recorded replies at {path}; record them first: "
                           "chatlab bench replay --record [--file PATH]")
    replies = json.loads(path.read_text())
    print(f"{'policy':<48}" + "".join(f"{t:>9}" for t in replies) + "   (modelled speed / plain)")
    for name, (spec, fixed) in POLICIES.items():
        speeds = replay_tasks(replies, spec, fixed_width=fixed, stop_at_end=not past_end)
        print(f"{name:<48}" + "".join(f"{v:>8.2f}x" for v in speeds.values()))
    bound = oracle_tasks(replies, stop_at_end=not past_end)
    print(f"{'bound: an oracle lookup, padded to 1+3':<48}" + "".join(f"{v:>8.2f}x" for v in bound.values()))
