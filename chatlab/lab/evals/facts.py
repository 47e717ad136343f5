"""Factual accuracy for notebook 09: the persona rate says *how* a model answers, not whether
the answer is right, so the held-out questions carry the facts a right answer names.

`data/finetune/heldout.jsonl` rows hold `instruction` (the question), `facts` (phrases, any one
of which a right answer contains; empty for a question of taste, which is left out of the rate)
and `gold` (a right answer in the persona's voice: the positive control replays it).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from chatlab.errors import ChatlabError
from chatlab.generate import Finished


@dataclass(frozen=True)
class HeldOut:
    question: str
    facts: tuple[str, ...]
    gold: str


def load_heldout(path: str | Path) -> list[HeldOut]:
    """The held-out rows with their facts and gold answers; a row without them is an error."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            facts = row["facts"]
            out.append(HeldOut(row["instruction"], tuple(facts), row["gold"]))
        except (ValueError, KeyError, TypeError) as err:
            raise ChatlabError(f"{path}:{n} needs instruction, facts (a list, may be empty) and gold "
                               f"({type(err).__name__}: {err})") from None
        if not isinstance(facts, list) or not all(isinstance(f, str) and f.strip() for f in facts):
            raise ChatlabError(f"{path}:{n}: facts must be a list of non-empty strings")
    return out


def states_fact(answer: str, facts: Sequence[str]) -> bool:
    """Whether `answer` names one of `facts`, each matched case-insensitively at the start of a
    word ("butterfl" matches "butterflies"; "2" does not match "12")."""
    return any(re.search(r"(?<!\w)" + re.escape(f), answer, re.I) for f in facts)


def fact_rate(answers: Sequence["str | Finished"], rows: Sequence[HeldOut]) -> tuple[int, int]:
    """(right, checked): answers (strings or Finished) that state their row's fact, over the
    rows that have facts at all."""
    if len(answers) != len(rows):
        raise ChatlabError(f"{len(answers)} answers for {len(rows)} questions: score them in pairs")
    pairs = [(a if isinstance(a, str) else a.text, r) for a, r in zip(answers, rows) if r.facts]
    return sum(states_fact(text, r.facts) for text, r in pairs), len(pairs)
