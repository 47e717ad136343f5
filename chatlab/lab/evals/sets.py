"""The evaluation sets in data/eval/ as typed records; a bad row's error names file, line and field."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from chatlab._thirdparty import Jsonable
from chatlab.data import data_path
from chatlab.errors import ChatlabError
from chatlab.generate import Finished


_Row = TypeVar("_Row", "DogCase", "Question", "Fact", "WeatherRequest")


@dataclass(frozen=True)
class DogCase:
    """One sentence and its dog; `accept_color`: other spellings of the color ("gray" for "grey")."""

    id: str
    text: str
    name: str
    color: str
    accept_color: tuple[str, ...] = ()
    note: str = ""
    source: str = "chatlab"


@dataclass(frozen=True)
class Question:
    """A question, its passage (a file and a quote in it), and key phrases, one of which an answer holds."""

    id: str
    question: str
    file: str
    quote: str
    answer: tuple[str, ...]


@dataclass(frozen=True)
class Fact:
    """A short question and key phrases: a reply containing one (any case) is counted right."""

    id: str
    question: str
    answer: tuple[str, ...]


@dataclass(frozen=True)
class WeatherRequest:
    """A user's weather question and the city a right call's `location` names."""

    id: str
    request: str
    location: str


def _rows(path: Path) -> list[tuple[int, dict[str, Jsonable]]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ChatlabError(f"{path.name} line {n} is not JSON ({err.msg}); write one JSON "
                               "object per line") from None
        if not isinstance(row, dict):
            raise ChatlabError(f"{path.name} line {n} is a {type(row).__name__}, not an object; "
                               "write one JSON object per line")
        rows.append((n, row))
    if not rows:
        raise ChatlabError(f"{path.name} holds no rows; add at least one JSON object per line")
    return rows


def _text(row: dict[str, Jsonable], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ChatlabError(f"{where}: {key!r} must be a non-empty string, got {value!r}; fix the row")
    return value


def _texts(row: dict[str, Jsonable], key: str, where: str, required: bool) -> tuple[str, ...]:
    value = row.get(key, [] if not required else None)
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value) \
            or (required and not value):
        need = "a non-empty list" if required else "a list"
        raise ChatlabError(f"{where}: {key!r} must be {need} of non-empty strings, got {value!r}; "
                           "fix the row")
    return tuple(value)


def _load(path: Path, make: Callable[[dict[str, Jsonable], str], _Row]) -> list[_Row]:
    """`make(row, where)` for every row of `path`; every row's id must be its own."""
    items = [make(row, f"{path.name} line {n}") for n, row in _rows(path)]
    seen = set()
    for item in items:
        if item.id in seen:
            raise ChatlabError(f"{path.name}: the id {item.id!r} appears twice; give every row its own id")
        seen.add(item.id)
    return items


def load_dogs(path: Path | None = None) -> list[DogCase]:
    """The extraction set (default data/eval/dogs.jsonl)."""
    return _load(path or data_path("eval", "dogs.jsonl"), lambda row, where: DogCase(
        id=_text(row, "id", where), text=_text(row, "text", where), name=_text(row, "name", where),
        color=_text(row, "color", where), accept_color=_texts(row, "accept_color", where, False),
        note=str(row.get("note", "")), source=str(row.get("source", "chatlab"))))


def load_questions(path: Path | None = None) -> list[Question]:
    """The retrieval/answer set (default data/eval/questions.jsonl)."""
    return _load(path or data_path("eval", "questions.jsonl"), lambda row, where: Question(
        id=_text(row, "id", where), question=_text(row, "question", where),
        file=_text(row, "file", where), quote=_text(row, "quote", where),
        answer=_texts(row, "answer", where, True)))


def load_facts(path: Path | None = None) -> list[Fact]:
    """The general-knowledge set (default data/eval/facts.jsonl)."""
    return _load(path or data_path("eval", "facts.jsonl"), lambda row, where: Fact(
        id=_text(row, "id", where), question=_text(row, "question", where),
        answer=_texts(row, "answer", where, True)))


def load_weather_requests(path: Path | None = None) -> list[WeatherRequest]:
    """The tool-call set (default data/eval/weather_requests.jsonl)."""
    return _load(path or data_path("eval", "weather_requests.jsonl"), lambda row, where: WeatherRequest(
        id=_text(row, "id", where), request=_text(row, "request", where),
        location=_text(row, "location", where)))


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
    """(right, checked): answers (strings or Finished) stating their row's fact, over rows with facts."""
    if len(answers) != len(rows):
        raise ChatlabError(f"{len(answers)} answers for {len(rows)} questions: score them in pairs")
    pairs = [(a if isinstance(a, str) else a.text, r) for a, r in zip(answers, rows) if r.facts]
    return sum(states_fact(text, r.facts) for text, r in pairs), len(pairs)
