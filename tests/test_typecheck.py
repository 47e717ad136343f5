"""mypy over chatlab/ finds no errors (its configuration: [tool.mypy] in pyproject.toml; the
third-party seams it cannot check are named in chatlab/_thirdparty.py). Not marked slow, so
every Python leg of CI runs it."""
from __future__ import annotations

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
