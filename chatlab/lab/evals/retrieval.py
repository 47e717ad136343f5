"""Retrieval and answer checks over data/docs for the question set, and the bench's task shapes."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from chatlab._thirdparty import HFTokenizer
from chatlab.data import data_path
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.lab.evals.bites import template_ids
from chatlab.lab.evals.sets import Question, load_dogs, load_questions


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
    """One Passage per paragraph of each file; a heading line names the passages after it."""
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
    """{k: share of questions whose gold passage is among the top k}, from one retrieval each."""
    questions = list(questions)
    if not questions or not ks:
        raise ChatlabError("hit_at_k needs questions and at least one k; pass load_questions() "
                           "and e.g. ks=(1, 3, 5)")
    ranked = [list(retrieve(q.question, max(ks))) for q in questions]
    return {k: hit_share(ranked, [q.quote for q in questions], k) for k in sorted(ks)}


def hit_share(ranked: Sequence[Sequence[str]], quotes: Sequence[str], k: int) -> float:
    """The share of quotes found in one of the top k passages of their own ranked list."""
    return sum(any(contains(t, q) for t in r[:k]) for r, q in zip(ranked, quotes)) / len(quotes)


def answer_has_key(answer: str, question: Question) -> bool:
    """Whether the answer holds a key phrase: a floor, not a grade (a right answer worded otherwise fails)."""
    return any(contains(answer, key) for key in question.answer)


def trim_repeats(text: str) -> str:
    """Cut a reply at the first sentence that repeats an earlier one (a small model's greedy
    loop), or a last sentence cut off by max_tokens that begins like an earlier one."""
    kept: list[str] = []
    seen: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        key = _squash(sentence).rstrip(" .,;:!?")
        if key and any(key == s or (len(key) >= 12 and s.startswith(key)) for s in seen):
            break
        seen.append(key)
        kept.append(sentence)
    return " ".join(kept)


TASKS = ["extract", "rag", "rewrite", "story"]
COPY_TASKS = ["extract", "rag", "rewrite"]

STORY_TOPICS = ["a lighthouse keeper who finds a lost kite", "a robot learning to bake bread",
                "two foxes planning a winter journey", "a village where it never stops raining"]


def task_messages(task: str) -> list[list[dict[str, str]]]:
    """The message lists of one task, in a fixed order (every case of its eval set)."""
    if task == "extract":
        return [[{"role": "user", "content": "Extract the dog's name and colour from this text "
                  "and answer with JSON like {\"name\": ..., \"color\": ...}, then quote the "
                  f"sentence that says so.\n\nText: {case.text}"}] for case in load_dogs()]
    if task == "rag":
        return [[{"role": "user", "content": f"Answer the question from the passage, quoting it."
                  f"\n\nPassage: {passage}\n\nQuestion: {question}"}]
                for question, passage in questions_with_passages()]
    if task == "rewrite":
        return [[{"role": "user", "content": "Rewrite this paragraph in simpler words, keeping "
                  f"its meaning:\n\n{p.text}"}] for p in _paragraphs()]
    if task == "story":
        return [[{"role": "user", "content": f"Write a short story about {topic}."}]
                for topic in STORY_TOPICS]
    raise UnknownNameError("bench task", task, TASKS)


def questions_with_passages() -> list[tuple[str, str]]:
    passages = split_passages(data_path("docs"))
    out = []
    for q in load_questions():
        found = [p.text for p in passages if p.file == q.file and contains(p.text, q.quote)]
        if not found:
            raise ChatlabError(f"question {q.id}: no passage of {q.file} contains its quote; fix "
                               "data/eval/questions.jsonl")
        out.append((q.question, found[0]))
    return out


def _paragraphs(min_chars: int = 200, max_chars: int = 900) -> list[Passage]:
    """Paragraphs of data/docs long enough to rewrite, short enough for a small model."""
    return [p for p in split_passages(data_path("docs"))
            if min_chars <= len(p.text) <= max_chars and not p.text.lstrip().startswith(("```", "|"))]


def task_prompts(tokenizer: HFTokenizer, task: str, limit: int | None = None) -> list[list[int]]:
    """The task's prompts as ids, rendered with the tokenizer's chat template."""
    return [template_ids(tokenizer, messages) for messages in task_messages(task)[:limit]]
