"""Run the engines side by side: one process each, interleaved rounds, medians and ranges.

Engines run one at a time (never two on the same cores), in an order that rotates every round,
so a slow stretch of the machine (other processes, thermal limits) spreads over all of them
instead of penalizing whichever came last. Each round times a short chat prompt (time to first
token and decode speed over `tokens` new tokens) and a ~1,000-token prompt (time to first
token). Medians are reported with the min–max range, and ratios to openvino-genai int8.
Every engine runs at the one precision of the config (f32 by default), and the result says
what each engine actually ran at, on which CPU (model, bf16/AMX flags) and with how many threads:
a number without those is not comparable across machines.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, cpu_info
from chatlab.bench.engines import BASELINE, ENGINES, EXTRA_ENGINES
from chatlab.errors import ChatlabError, UnknownNameError

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

    @classmethod
    def make(cls, model: str, quick: bool = False, rounds: int | None = None,
             tokens: int | None = None, engines: list[str] | None = None,
             precision: str | None = None) -> "BenchConfig":
        for e in engines or []:
            if e not in ENGINES + EXTRA_ENGINES:
                raise UnknownNameError("benchmark engine", e, ENGINES + EXTRA_ENGINES)
        if rounds is not None and rounds < 1 or tokens is not None and tokens < 2:
            raise ChatlabError("--rounds must be >= 1 and --tokens >= 2")
        return cls(model=model, engines=list(engines or ENGINES),
                   rounds=rounds or (3 if quick else 5), tokens=tokens or (64 if quick else 128),
                   precision=check_precision(precision))


def bench_prompts(model: str) -> dict[str, list[int]]:
    """The same rendered ids for every engine: a short chat turn and a ~1,000-token one."""
    from chatlab.models import load_tokenizer
    from chatlab.render import resolve

    res = resolve(load_tokenizer(model), model)
    short = res.render([{"role": "user", "content": SHORT_QUESTION}]).ids
    text, long = "", short
    while len(long) < LONG_PROMPT_TOKENS:
        text += FILLER
        long = res.render([{"role": "user", "content": text + "\nSummarize the text above."}]).ids
    return {"short": short, "long": long}


class Worker:
    def __init__(self, engine: str, model: str, precision: str = DEFAULT_PRECISION) -> None:
        self.engine = engine
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "chatlab.bench.worker", engine, model,
                                      precision],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        ready = self.ask(None)
        self.load_s = float(ready["load_s"])
        self.precision, self.threads = ready.get("precision"), ready.get("threads")

    def ask(self, request: dict[str, Any] | None) -> dict[str, Any]:
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


def summarize(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def run_benchmark(config: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Load every engine, run the interleaved rounds, return the summary (see `--json`)."""
    from tqdm.auto import tqdm

    from chatlab.bench.report import add_ratios

    prompts = bench_prompts(config.model)
    workers: dict[str, Worker] = {}
    samples: dict[str, dict[str, list[float]]] = {e: {"ttft": [], "ttft_long": [], "decode": []}
                                                  for e in config.engines}
    first_tokens: dict[str, list[int]] = {}
    try:
        for e in tqdm(config.engines, desc="loading engines", disable=not progress):
            workers[e] = Worker(e, config.model, config.precision)
            workers[e].ask({"ids": prompts["short"], "tokens": 4})  # warm-up, not timed
        steps = config.rounds * len(config.engines)
        with tqdm(total=steps, desc="interleaved rounds", disable=not progress) as bar:
            for r in range(config.rounds):
                shift = r % len(config.engines)
                for e in config.engines[shift:] + config.engines[:shift]:
                    short = workers[e].ask({"ids": prompts["short"], "tokens": config.tokens})
                    long = workers[e].ask({"ids": prompts["long"], "tokens": config.long_tokens})
                    samples[e]["ttft"].append(short["ttft_s"] * 1000)
                    samples[e]["decode"].append(short["decode_tok_s"])
                    samples[e]["ttft_long"].append(long["ttft_s"] * 1000)
                    first_tokens.setdefault(e, short["tokens"])
                    bar.update()
        rss = {e: w.close() for e, w in workers.items()}
    finally:
        for w in workers.values():
            w.kill()
    rows = []
    for e in config.engines:
        s = samples[e]
        decode, ttft, ttft_long = summarize(s["decode"]), summarize(s["ttft"]), summarize(s["ttft_long"])
        rows.append({
            "name": e, "decode_tok_s": decode[0], "decode_tok_s_range": decode[1:],
            "ttft_ms": ttft[0], "ttft_ms_range": ttft[1:],
            "ttft_long_ms": ttft_long[0], "ttft_long_ms_range": ttft_long[1:],
            "rss_mb": rss[e], "load_s": workers[e].load_s,
            "precision": workers[e].precision, "threads": workers[e].threads,
            "first_tokens": first_tokens[e][:16],
        })
    result = {"model": config.model, "rounds": config.rounds, "new_tokens": config.tokens,
              "prompt_tokens": {"short": len(prompts["short"]), "long": len(prompts["long"])},
              "baseline": BASELINE, "precision": config.precision, "cpu": cpu_info(), "engines": rows}
    add_ratios(result)
    return result
