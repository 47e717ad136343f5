"""Every exercise in the notebooks, graded: each hidden solution passes its check, and each
attempt cell, as stored (the stub), reports "not attempted yet".

The cells are read from the .ipynb files and run here without the notebook: a solution's
statements run in a fresh namespace, except its `check(...)` calls, which are replaced by
`run(name, fn)` with no context, so the cases load their own tokenizer or model. Exercises whose
cases need the stateless OpenVINO export (nb03's cache ones) are in the slow test."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from chatlab.lab.exercises import run

# notebooks 01-04 (05-09: tests/test_notebook_exercises_05_09.py)
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0[1-4]_*.ipynb"))
NEEDS_MODEL = {"nb03.cache_bytes", "nb03.fourth_token", "nb03.kv_forward"}


def exercises() -> list[tuple[str, str, str, str]]:
    """(notebook, exercise name, attempt source, solution source) for every check cell."""
    found = []
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        for i, c in enumerate(cells):
            if "check" in c.metadata.get("tags", []):
                name = re.search(r'check\("([\w.]+)"', c.source).group(1)
                found.append((path.stem, name, cells[i - 1].source, cells[i + 1].source))
    return found


EXERCISES = exercises()


def _is_check(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
        getattr(node.value.func, "id", "") == "check"


def _prelude(notebook: str) -> dict[str, Any]:
    """The names a notebook's solutions use from its earlier cells (imports, the tools)."""
    import numpy as np

    ns: dict[str, Any] = {"np": np}
    if notebook.startswith("01"):
        from chatlab.models.chatglm3 import special_tokens_from_text
        ns["special_tokens_from_text"] = special_tokens_from_text
    if notebook.startswith("02"):
        from chatlab.render import get_template, resolve
        from chatlab.render.io.jinja_writer import tokenizer_for
        from chatlab.render.io import export_template
        ns.update(get_template=get_template, resolve=resolve, export_template=export_template,
                  tokenizer_for=tokenizer_for)
    if notebook.startswith("03"):
        from chatlab.lab import explicit_kv
        ns["explicit_kv"] = explicit_kv
    if notebook.startswith("04"):
        from chatlab.lab.exercises.nb04 import TOOLS
        from chatlab.generate import StopMatcher
        from chatlab.tools import fold, get_parser, validate_arguments
        from chatlab.types import parse_tools
        ns.update(TOOLS=TOOLS, StopMatcher=StopMatcher, fold=fold, get_parser=get_parser,
                  validate_arguments=validate_arguments, parse_tools=parse_tools)
    return ns


def grade(notebook: str, source: str) -> list[Any]:
    """Run a cell's statements but its check calls; grade each check's function instead."""
    tree = ast.parse(source)
    ns = _prelude(notebook)
    body = [n for n in tree.body if not _is_check(n)]
    exec(compile(ast.Module(body=body, type_ignores=[]), notebook, "exec"), ns)
    reports = []
    for node in tree.body:
        if _is_check(node):
            call = node.value
            reports.append(run(call.args[0].value, ns[call.args[1].id]))
    return reports


def solution_passes_and_stub_is_not_attempted(notebook: str, name: str, attempt: str,
                                              solution: str) -> None:
    """The hidden solution passes every case; the learner's stub, untouched, reports
    "not attempted" (so Run All on a fresh notebook does not fail)."""
    reports = grade(notebook, solution)
    assert reports and all(r.ok for r in reports), [r.text for r in reports]
    stub_ns = _prelude(notebook)
    exec(attempt, stub_ns)
    fn = next(v for k, v in stub_ns.items() if callable(v) and k in attempt.split("def ", 1)[1].split("(")[0])
    assert run(name, fn).status == "not attempted"


def test_the_notebooks_hold_the_build_it_yourself_exercises() -> None:
    names = {name for _, name, _, _ in EXERCISES}
    assert {"nb03.kv_forward", "nb03.stop_matcher", "nb04.react_buffer"} <= names
    assert len(EXERCISES) >= 12


@pytest.mark.parametrize("notebook,name,attempt,solution",
                         [e for e in EXERCISES if e[1] not in NEEDS_MODEL],
                         ids=[e[1] for e in EXERCISES if e[1] not in NEEDS_MODEL])
def test_each_solution_passes_and_each_stub_is_not_attempted(notebook: str, name: str, attempt: str,
                                                              solution: str) -> None:
    solution_passes_and_stub_is_not_attempted(notebook, name, attempt, solution)


@pytest.mark.slow
@pytest.mark.parametrize("notebook,name,attempt,solution",
                         [e for e in EXERCISES if e[1] in NEEDS_MODEL],
                         ids=[e[1] for e in EXERCISES if e[1] in NEEDS_MODEL])
def test_each_model_solution_passes(notebook: str, name: str, attempt: str, solution: str) -> None:
    solution_passes_and_stub_is_not_attempted(notebook, name, attempt, solution)
