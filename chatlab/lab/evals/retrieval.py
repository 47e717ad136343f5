"""Retrieval and answer checks over data/docs for the question set.

The documents are short notes; a hit per file would say little, so the index is built from
passages (one per paragraph, the file's heading kept as metadata) and a question's hit is the
passage holding its gold quote. `hit_at_k` takes any `retrieve(question, k) -> list of texts`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from chatlab.errors import ChatlabError
from chatlab.lab.evals.sets import Question


Retrieve = Callable[[str, int], Sequence[str]]


@dataclass(frozen=True)
class Passage:
    """A paragraph of a document, with the file it comes from and the file's `# heading`."""

    file: str
    heading: str
    text: str


def _squash(text: str) -> str:
    """Case and line breaks do not matter when matching a quote against a passage."""
    return re.sub(r"\s+", " ", text).strip().lower()


def contains(text: str, phrase: str) -> bool:
    return _squash(phrase) in _squash(text)


def split_passages(folder: Path, pattern: str = "*.md") -> list[Passage]:
    """One Passage per blank-line separated paragraph of each file; heading lines are not
    passages of their own (they name the file's topic and go into every passage's metadata)."""
    files = sorted(Path(folder).glob(pattern))
    if not files:
        raise ChatlabError(f"no {pattern} files in {folder}; pass the docs folder "
                           "(chatlab.data_path('docs'))")
    passages = []
    for path in files:
        heading = ""
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            lines = block.strip().splitlines()
            while lines and lines[0].startswith("#"):
                heading = lines.pop(0).lstrip("#").strip()
            if lines:
                passages.append(Passage(path.name, heading, "\n".join(lines)))
    return passages


def hits(retrieve: Retrieve, questions: Iterable[Question], k: int) -> list[bool]:
    """For each question: is its gold passage (the one holding its quote) in the top k?"""
    if k < 1:
        raise ChatlabError(f"k={k} retrieves nothing; use k >= 1")
    return [any(contains(text, q.quote) for text in list(retrieve(q.question, k))[:k])
            for q in questions]


def hit_at_k(retrieve: Retrieve, questions: Iterable[Question], ks: Sequence[int] = (1, 3, 5)) -> dict[int, float]:
    """{k: share of questions whose gold passage is among the top k}; one retrieval per
    question at the largest k (a ranking's top k is a prefix of its top max(k))."""
    questions = list(questions)
    if not questions or not ks:
        raise ChatlabError("hit_at_k needs questions and at least one k; pass load_questions() "
                           "and e.g. ks=(1, 3, 5)")
    ranked = [list(retrieve(q.question, max(ks))) for q in questions]
    return {k: sum(any(contains(t, q.quote) for t in r[:k]) for q, r in zip(questions, ranked)) / len(questions)
            for k in sorted(ks)}


def answer_has_key(answer: str, question: Question) -> bool:
    """A crude automatic check: does the answer contain any of the question's key phrases?
    It cannot tell a right answer that words it differently from a wrong one that quotes the
    passage; it is a floor for a human reading, not a grade."""
    return any(contains(answer, key) for key in question.answer)


def trim_repeats(text: str) -> str:
    """Cut a reply at the first sentence that repeats an earlier one (a small model's greedy
    loop: "The server can parse the JSON schema... The server can parse the JSON schema..."),
    including a last sentence cut off by max_tokens that begins like an earlier one."""
    kept: list[str] = []
    seen: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        key = _squash(sentence).rstrip(" .,;:!?")
        if key and any(key == s or (len(key) >= 12 and s.startswith(key)) for s in seen):
            break
        seen.append(key)
        kept.append(sentence)
    return " ".join(kept)
