"""Notebooks 05-09: each exercise's solution cell, taken from the .ipynb, passes its check, and
its attempt cell (the stub a learner starts from) reports "not attempted yet".

Only the solution's function definitions and imports run here (the rest of a solution cell uses
the notebook's model or server); the check's own cases need no model, and where a check takes
the notebook's objects the test passes stand-ins built from the stored data.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from chatlab.lab.exercises import run

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p for p in ROOT.glob("0[5-9]_*.ipynb"))


def exercises(path: Path) -> list[tuple[str, str, str]]:
    """(check name, attempt source, solution source) per exercise, in order."""
    cells = nbformat.read(path, as_version=4).cells
    out = []
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("### Exercise"):
            attempt, checker, solution = cells[i + 1:i + 4]
            (name,) = re.findall(r'\bcheck\("(nb\d\d\.\w+)"', checker.source)[:1]
            out.append((name, attempt.source, solution.source))
    return out


def definitions(cell_source: str, before: str = "") -> tuple[dict[str, Any], str]:
    """The namespace made by a cell's imports and defs alone (after the imports of `before`, the
    attempt cell a solution follows), and the last function's name."""
    namespace: dict[str, Any] = {}
    if before:
        imports = [n for n in ast.parse(before).body if isinstance(n, (ast.Import, ast.ImportFrom))]
        exec(compile(ast.Module(body=imports, type_ignores=[]), "<attempt>", "exec"), namespace)  # noqa: S102
    tree = ast.parse(cell_source)
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef))]
    exec(compile(ast.Module(body=keep, type_ignores=[]), "<cell>", "exec"), namespace)  # noqa: S102
    fn = [n.name for n in keep if isinstance(n, ast.FunctionDef)][-1]
    return namespace, fn


def context_for(name: str) -> dict[str, Any]:
    """What the check cell passes, where the check needs it and the stored data can stand in."""
    if name == "nb08.stop_question":
        # a stand-in retriever: the notebook's solution question is about holding back stop strings
        return {"top_file": lambda q: "stop_words.md" if "hold back" in q else "function_calling.md"}
    return {}


CASES = [(p.stem, *ex) for p in NOTEBOOKS for ex in exercises(p)]


def test_every_notebook_has_its_exercises() -> None:
    assert [stem for stem in sorted({c[0] for c in CASES})] == [p.stem for p in NOTEBOOKS]
    assert all(2 <= sum(c[0] == p.stem for c in CASES) <= 3 for p in NOTEBOOKS)


@pytest.mark.parametrize("stem, name, attempt, solution", CASES, ids=[c[1] for c in CASES])
def test_the_solution_passes_and_the_stub_is_not_attempted(stem: str, name: str, attempt: str, solution: str) -> None:
    namespace, fn = definitions(solution, before=attempt)
    report = run(name, namespace[fn], **context_for(name))
    assert report.ok, report.text
    stub_ns, stub = definitions(attempt)
    assert stub == fn, f"{stem}: the attempt defines {stub!r}, the solution {fn!r}"
    fresh = run(name, stub_ns[stub], **context_for(name))
    assert fresh.status == "not attempted" and "not attempted yet" in fresh.text
    wrong = run(name, lambda *args: None, **context_for(name))
    assert wrong.status == "fail", f"{name}: an attempt returning None passes its check"


def test_a_wrong_stop_question_fails() -> None:
    """The stop-word exercise is not a formality: a question about something else fails."""
    ctx = context_for("nb08.stop_question")
    assert run("nb08.stop_question", lambda top_file: "How are tools listed?", **ctx).status == "fail"
    assert run("nb08.stop_question", lambda top_file: "Where do stop words hold back?", **ctx).ok
