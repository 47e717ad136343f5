"""Which Python runs optimum-cli (chatlab.backends.export): this one where optimum-intel's
requirements are met, else an isolated venv built once from the lock. The real build runs on
the Colab replica (tests/test_colab_replica.py, notebook 03's export); here its decisions and
its failure handling, without a network."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatlab.backends import export
from chatlab.errors import ChatlabError


def test_this_python_runs_the_export_where_optimum_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATLAB_EXPORT_PYTHON", raising=False)
    assert export.unmet() == []  # the lock's optimum-intel beside the lock's transformers
    assert export.export_python() == sys.executable
    monkeypatch.setenv("CHATLAB_EXPORT_PYTHON", "/opt/other/python")
    assert export.export_python() == "/opt/other/python"


def test_unmet_names_a_missing_distribution_and_a_version_outside_a_range(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert export.unmet("no-such-distribution-xyz")[0] == "no-such-distribution-xyz is not installed"
    real = export.md.version
    monkeypatch.setattr(export.md, "version",
                        lambda name: "5.15.0" if name.lower() == "transformers" else real(name))
    problems = export.unmet()
    assert any(p.startswith("optimum-intel needs transformers") and p.endswith("this Python has 5.15.0")
               for p in problems), problems


def fake_build(ok: bool = True) -> tuple[list[list[str]], object]:
    ran: list[list[str]] = []

    def run(step: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        ran.append(step)
        if step[1:3] == ["-m", "venv"]:
            env = Path(step[-1])
            (env / "bin").mkdir(parents=True)
            (env / "bin" / "python").write_text("")
            (env / "lib" / "python3.x" / "site-packages").mkdir(parents=True)
        return subprocess.CompletedProcess(step, 0 if ok else 1, "", "" if ok else "ERROR: No matching distribution")
    return ran, run


def test_the_isolated_env_is_built_once_from_the_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    ran, run = fake_build()
    python = export.ensure_env(run=run)
    assert python.parent.parent.parent == tmp_path / "export-env" and (python.parent.parent / export.STAMP).is_file()
    venv, pip = ran
    assert venv[1:3] == ["-m", "venv"]
    pth = (python.parent.parent / "lib" / "python3.x" / "site-packages" / "_chatlab_kernel_site.pth").read_text()
    import site

    assert [f for f in site.getsitepackages() if Path(f).is_dir()][0] in pth.splitlines()
    pins = export.lock_pins()
    assert pip[0] == str(python) and f"transformers=={pins['transformers']}" in pip
    assert f"optimum-intel=={pins['optimum-intel']}" in pip and f"nncf=={pins['nncf']}" in pip
    assert not list((tmp_path / "export-env").glob(".*constraints*"))  # removed after the build
    assert export.ensure_env(run=run) == python and len(ran) == 2  # built once


def test_a_failed_build_is_one_message_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    _, run = fake_build(ok=False)
    with pytest.raises(ChatlabError, match="(?s)could not build the export environment.*No matching.*rebuilt"):
        export.ensure_env(run=run)
    assert [p.name for p in (tmp_path / "export-env").iterdir() if not p.name.startswith(".")] == []


def test_only_the_export_stack_is_pinned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The rest resolves against this Python's packages: pinning it to the lock pulled a second
    torch on the Colab replica."""
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    seen: list[str] = []
    ran, run = fake_build()

    def spy(step: list[str], **kw: object) -> object:
        if "-c" in step:
            seen.append(Path(step[step.index("-c") + 1]).read_text())
        return run(step, **kw)  # type: ignore[operator]

    export.ensure_env(run=spy)
    assert sorted(line.split("==")[0] for line in seen[0].split()) == sorted(export.EXPORT_STACK)
