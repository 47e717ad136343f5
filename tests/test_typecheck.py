"""mypy over chatlab/ finds no errors (its configuration: [tool.mypy] in pyproject.toml; the
third-party seams it cannot check are named in chatlab/_thirdparty.py). Not marked slow, so
every Python leg of CI runs it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def test_mypy_finds_no_errors_in_chatlab() -> None:
    pytest.importorskip("mypy", reason="mypy is pinned in the test extra; pip install -e '.[test]'")
    done = _mypy("--cache-dir", str(ROOT / ".mypy_cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_mypy_config_catches_a_type_error(tmp_path: Path) -> None:
    """The same configuration reports a wrong call (so the check above is not vacuous)."""
    pytest.importorskip("mypy", reason="mypy is pinned in the test extra; pip install -e '.[test]'")
    bad = tmp_path / "bad.py"
    bad.write_text("from chatlab.protocols import StepBackend\n\n"
                   "def run(b: StepBackend) -> None:\n    b.prefill('not ids')\n")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
                 str(bad), cwd=ROOT)
    assert done.returncode == 1 and "bad.py:4: error" in done.stdout, done.stdout + done.stderr


# -- `Any` only where a third-party object has no types, named once ---------------------------
PACKAGE = ROOT / "chatlab"
SEAMS = PACKAGE / "_thirdparty.py"  # the one module that may spell `Any` (its aliases name the seams)


def any_uses(source: str, filename: str = "<text>") -> list[int]:
    """Lines where `typing.Any` is imported or used: `from typing import Any` (or typing_extensions),
    `typing.Any`, a bare `Any` name, and `Any` inside a string annotation ("dict[str, Any]")."""
    found: list[int] = []

    def annotation_text(node: ast.expr | None) -> None:
        # a quoted annotation (or a quoted part of one) is code too: parse it and look again
        for sub in ast.walk(node) if node is not None else ():
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    inner = ast.parse(sub.value, mode="eval")
                except SyntaxError:
                    continue
                if any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(inner)):
                    found.append(sub.lineno)

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions"):
            found += [node.lineno for a in node.names if a.name == "Any"]
        elif isinstance(node, ast.Attribute) and node.attr == "Any" and isinstance(node.value, ast.Name) \
                and node.value.id in ("typing", "typing_extensions", "t"):
            found.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "Any":
            found.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                    *(a for a in (node.args.vararg, node.args.kwarg) if a is not None)]
            for a in args:
                annotation_text(a.annotation)
            annotation_text(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotation_text(node.annotation)
    return sorted(set(found))


def test_any_appears_only_in_the_named_seams() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == SEAMS:
            continue
        lines = any_uses(path.read_text(encoding="utf-8"), str(path))
        if lines:
            offenders[str(path.relative_to(ROOT))] = lines
    assert not offenders, ("typing.Any outside chatlab/_thirdparty.py (use a chatlab type, a protocol, "
                           f"object, or name the untyped third-party seam there): {offenders}")


def test_the_any_check_sees_every_spelling() -> None:
    assert any_uses("from typing import Any\n") == [1]
    assert any_uses("import typing\nx: typing.Any = 1\n") == [2]
    assert any_uses("from typing import Dict\ndef f(a: 'dict[str, Any]') -> None: ...\n") == [2]
    assert any_uses("def f(a: int) -> 'list[Any]': ...\n") == [1]
    assert any_uses("y: 'Any' = 1\n") == [1]
    assert any_uses("def f(a: list['Any']) -> None: ...\n") == [1]
    assert any_uses("from chatlab._thirdparty import Jsonable\ndef f(a: Jsonable, b: object) -> None: ...\n") == []
    assert any_uses("AnyBackend = 1\nmessage = 'Any error is fine in prose'\n") == []
