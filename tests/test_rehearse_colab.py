"""`./run.sh rehearse --colab` (ColabRunner in chatlab/lab/rehearse.py): the runner's pieces
with fakes (a wrong route refused before the replica is touched, the first cell's restart
recognised and run through the one notebook runner, the export times read from a store, each
runtime's folder and environment gone afterwards, also on an interrupt), and (slow) notebook
01's route on a cold runtime of the replica."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbclient
import nbformat
import pytest

from chatlab.cli import main
from chatlab.lab import rehearse as rh
from chatlab.lab.route import ROUTE


class Refused(rh.ColabRunner):
    def prepare(self) -> None:
        raise AssertionError("the replica was prepared for a route that does not validate")


def test_a_wrong_route_fails_before_the_replica_is_touched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tuple(replace(s, sections=("No such heading",)) if s.notebook == "03" else s for s in ROUTE)
    assert rh.rehearse([], stops=missing, runner=Refused(tmp_path / "venv")) == 2
    assert "notebook 03 has no section 'No such heading'" in capsys.readouterr().err
    assert rh.rehearse(["02"], dry_run=True, runner=Refused(tmp_path / "venv")) == 0
    assert not (tmp_path / "venv").exists()


def test_the_cli_builds_a_colab_runner_and_writes_the_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[object] = []

    def fake(numbers: list[str], everything: bool, dry_run: bool, cgroup: bool, runner: object = None,
             report: Path | None = None, klass: bool = False) -> int:
        seen.extend([numbers, everything, dry_run, cgroup, type(runner).__name__, report, klass])
        return 0

    monkeypatch.setattr(rh, "rehearse", fake)
    assert main(["rehearse", "--colab", "--cgroup", "--all", "--json", str(tmp_path / "t.json"), "05"]) == 0
    assert seen == [["05"], True, False, True, "ColabRunner", tmp_path / "t.json", False]
    seen.clear()
    assert main(["rehearse", "01"]) == 0
    assert seen[4] == "NoneType"
    seen.clear()
    assert main(["rehearse", "--colab", "--class", "--cgroup"]) == 0
    assert seen == [[], False, False, True, "ColabRunner", None, True]


def _cell(source: str, outputs: list[dict[str, object]]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def test_the_restart_request_is_told_from_a_failure_and_build_notices_from_stderr() -> None:
    restart = _cell("setup()", [{"output_type": "stream", "name": "stdout", "text": "chatlab setup: kept\n"},
                                {"output_type": "error", "ename": "SetupError", "traceback": [],
                                 "evalue": "installed new versions of setuptools ...: restart the session "
                                           "(Runtime → Restart session), then run this cell again"}])
    assert rh.asks_restart(restart)
    broken = _cell("setup()", [{"output_type": "error", "ename": "SetupError", "traceback": [],
                                "evalue": "the install stopped in `pip install -q` ..."}])
    assert not rh.asks_restart(broken)
    notice = _cell("load()", [{"output_type": "stream", "name": "stderr",
                               "text": "chatlab: exporting smol to OpenVINO int8 (once; ...)\n"
                                       "chatlab: building the export environment /x (once: ...)\n"}])
    assert rh._stderr_or_error(notice) == ""
    warned = _cell("load()", [{"output_type": "stream", "name": "stderr",
                               "text": "chatlab: exporting smol ...\nUserWarning: torch_dtype is deprecated\n"}])
    assert rh._stderr_or_error(warned) == "stderr: UserWarning: torch_dtype is deprecated"
    assert rh.is_bite(_cell("split, fixed = split_markers_bite(smol, res, facts)", []))
    assert not rh.is_bite(_cell("from chatlab.lab.evals.bites import table", []))


def test_a_notebook_without_the_set_up_cell_first_is_refused() -> None:
    with pytest.raises(rh.RouteError, match="first code cell is not the set-up cell"):
        rh.first_code_cell([nbformat.v4.new_markdown_cell("# x"), _cell("print(1)", [])])
    assert rh.first_code_cell([nbformat.v4.new_markdown_cell("# x"),
                               _cell("from chatlab.lab.session import setup\nsetup()", [])]) == 1


class FakeClient:
    """nbclient's NotebookClient as run_notebook drives it: a sleeping process stands in for the
    kernel, and the set-up cell asks for one restart, then reports its session (`SESSION`)."""

    made: list["FakeClient"] = []
    SESSION = "chatlab setup: ready (colab), Python 3.13\n"

    def __init__(self, nb: nbformat.NotebookNode, **options: object) -> None:
        self.path = options["resources"]["metadata"]["path"]  # type: ignore[index]
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.km = SimpleNamespace(provisioner=SimpleNamespace(pid=self.proc.pid), restart_kernel=self.restart)
        self.kc = SimpleNamespace(wait_for_ready=self.ready)
        self.restarts = 0
        self.ran: list[int] = []  # the indices of the cells run, in order
        FakeClient.made.append(self)

    @contextmanager
    def setup_kernel(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.proc.kill()
            self.proc.wait()

    async def restart(self, now: bool = False) -> None:
        self.restarts += 1

    async def ready(self, timeout: float | None = None) -> None:
        pass

    def execute_cell(self, cell: nbformat.NotebookNode, index: int) -> None:
        self.ran.append(index)
        if "from chatlab.lab.session import setup" not in cell.source:
            cell.outputs = []
        elif self.restarts == 0:
            cell.outputs = [nbformat.from_dict({
                "output_type": "error", "ename": "SetupError", "traceback": [],
                "evalue": "installed new versions of numpy: restart the session, then run this cell again"})]
        else:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=self.SESSION)]


def test_one_runner_runs_a_notebook_here_or_on_colab_with_the_restart(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(nbclient, "NotebookClient", FakeClient)
    FakeClient.made.clear()
    row = rh.run_notebook("01", [1, 4, 6], 2, "colab-replica", None, tmp_path / "content")
    client = FakeClient.made[-1]
    assert client.path == str(tmp_path / "content") and client.restarts == 1
    assert client.ran == [0, 0, 1, 2]  # the set-up cell again after the restart, then the rest
    assert row.problem == "" and set(row.parts) == {"install", "restart"} and row.cells == 3
    # this Python's kernel: the set-up cell is an ordinary cell, its error a failure
    row = rh.run_notebook("01", [1, 4, 6], 2)
    client = FakeClient.made[-1]
    assert client.path == str(rh.route.NOTEBOOKS) and client.restarts == 0 and client.ran == [0]
    assert row.problem.startswith("cell 1: SetupError: installed new versions") and row.parts == {}
    # a set-up cell that does not report a Colab session stops the run there
    monkeypatch.setattr(FakeClient, "SESSION", "chatlab setup: ready (local), Python 3.11\n")
    row = rh.run_notebook("01", [1, 4, 6], 2, "colab-replica", None, tmp_path / "content")
    assert row.problem == "cell 1: the set-up cell did not report a Colab session"
    assert FakeClient.made[-1].ran == [0, 0]


def test_build_seconds_come_from_the_store(tmp_path: Path) -> None:
    env = tmp_path / "export-env" / "py313-abc"
    env.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("")
    (env / ".chatlab-export-env").write_text("")
    os.utime(env / "pyvenv.cfg", (1000, 1000))
    os.utime(env / ".chatlab-export-env", (1063.5, 1063.5))
    for fmt, seconds in (("int8", 30.5), ("int4", 12.0)):
        (tmp_path / "openvino" / "smol" / fmt).mkdir(parents=True)
        (tmp_path / "openvino" / "smol" / fmt / "chatlab-export.json").write_text(json.dumps({"seconds": seconds}))
    assert rh.build_seconds(tmp_path) == {"env": 63.5, "export": 42.5}
    assert rh.build_seconds(tmp_path / "empty") == {}


def test_the_table_shows_the_setup_parts_and_the_bite() -> None:
    rows = [rh.Row("01", 9, 200.0, 100.0, 1500.0, parts={"install": 150.0, "restart": 20.0, "export": 30.0},
                   bite_s=280.0),
            rh.Row("02", 6, 180.0, 5.0, 900.0, parts={"install": 160.0, "restart": 15.0})]
    lines = rh.table(rows).splitlines()
    assert lines[0].split()[10:] == ["install", "s", "restart", "s", "export", "s", "bite", "s", "problem"]
    assert lines[1].split() == ["01", "9", "200.0", "100.0", "1500", "300.0", "150.0", "20.0", "30.0", "280.0", "-"]
    assert lines[2].split() == ["02", "6", "180.0", "5.0", "900", "185.0", "160.0", "15.0", "-", "-", "-"]
    assert lines[3].split() == ["total", "15", "380.0", "105.0", "1500", "485.0", "310.0", "35.0", "30.0"]


class Fake(rh.ColabRunner):
    """The replica's steps recorded, no venv touched; the notebook run replaced by `run`."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp / "venv")
        self.calls: list[str] = []
        real = self.replica
        self.replica = SimpleNamespace(reset=lambda venv: self.calls.append(f"reset {venv.name}"),
                                       NOT_CLONED=real.NOT_CLONED, AS_ON_COLAB=real.AS_ON_COLAB)  # type: ignore[assignment]

    def prepare(self) -> None:
        self.calls.append("prepare")


def test_each_runtime_is_fresh_and_removed_also_on_an_interrupt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    replica = rh._tests_module("replica")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    runner = Fake(tmp_path)
    seen: list[dict[str, object]] = []

    def fake_run(number: str, cells: list[int], n_setup: int, kernel: str, group: object, cwd: Path) -> rh.Row:
        spec = json.loads((Path(os.environ["JUPYTER_PATH"]) / "kernels" / kernel / "kernel.json").read_text())
        home = Path(os.environ["CHATLAB_HOME"])
        seen.append({"clone": (cwd / "chatlab" / "chatlab" / "__init__.py").is_file(),
                     "git": (cwd / "chatlab" / ".git").exists(), "home_empty": not home.exists(),
                     "pythonpath": os.environ.get("PYTHONPATH"), "argv": spec["argv"],
                     "clone_env": os.environ["CHATLAB_CLONE"], "runtime": cwd.parent})
        (home / "openvino" / "smol" / "int8").mkdir(parents=True)
        (home / "openvino" / "smol" / "int8" / "chatlab-export.json").write_text('{"seconds": 7.0}')
        if number == "02":
            raise KeyboardInterrupt
        return rh.Row(number, len(cells), 10.0, 5.0, 800.0, parts={"install": 8.0})

    monkeypatch.setattr(rh, "run_notebook", fake_run)
    with pytest.raises(KeyboardInterrupt):
        rh.rehearse(["01", "02"], runner=runner, report=tmp_path / "r.json")
    assert runner.calls == ["prepare", "reset venv", "reset venv"]
    assert [s["clone"] for s in seen] == [True, True] and not any(s["git"] for s in seen)
    assert all(s["home_empty"] and s["pythonpath"] is None for s in seen)
    assert seen[0]["argv"][0] == str(tmp_path / "venv" / "bin" / "python")  # type: ignore[index]
    assert replica.AS_ON_COLAB in seen[0]["argv"]  # type: ignore[operator]
    assert seen[0]["clone_env"] != seen[1]["clone_env"]
    assert not any(Path(str(s["runtime"])).exists() for s in seen)
    assert os.environ["PYTHONPATH"] == "/somewhere" and "CHATLAB_CLONE" not in os.environ
    assert not (tmp_path / "r.json").exists()  # no report for an interrupted run


def test_a_finished_run_reports_its_parts_in_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], fake_cpu: Any) -> None:
    here = fake_cpu(model="Colab's CPU", threads=3)
    runner = Fake(tmp_path)

    def fake_run(number: str, cells: list[int], n_setup: int, kernel: str, group: object, cwd: Path) -> rh.Row:
        home = Path(os.environ["CHATLAB_HOME"])
        (home / "openvino" / "smol" / "int8").mkdir(parents=True)
        (home / "openvino" / "smol" / "int8" / "chatlab-export.json").write_text('{"seconds": 7.0}')
        problem = "cell 18: ModuleNotFoundError: No module named 'x'" if number == "02" else ""
        return rh.Row(number, len(cells), 10.0, 5.0, 800.0, problem, parts={"install": 8.0}, bite_s=12.0)

    monkeypatch.setattr(rh, "run_notebook", fake_run)
    assert rh.rehearse(["01", "02"], runner=runner, report=tmp_path / "r.json") == 1
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["runner"] == "Fake" and data["cells"] == "route" and data["machine"]["cores"] == 3
    assert data["machine"]["cpu"] == here.model
    assert data["pip_cache"] is (os.environ.get("PIP_NO_CACHE_DIR") is None)
    assert data["rows"][0]["parts_s"] == {"install": 8.0, "export": 7.0} and data["rows"][0]["bite_s"] == 12.0
    assert data["rows"][1]["problem"].startswith("cell 18: ModuleNotFoundError") and data["total_s"] == 30.0
    assert "cell 18: ModuleNotFoundError" in capsys.readouterr().out


@pytest.mark.slow
def test_notebook_01s_route_runs_on_a_cold_colab_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    replica = rh._tests_module("replica")
    if replica.python313() is None and not (rh.REPO / ".venv313-colab" / "bin" / "python").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("no Python 3.13 for the Colab replica (python3.13, or pyenv's 3.13.x)")
        pytest.skip("no Python 3.13 for the Colab replica (python3.13, or pyenv's 3.13.x)")
    assert rh.rehearse(["01"], runner=rh.ColabRunner()) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    header, row = out.splitlines()[0].split(), next(line.split() for line in out.splitlines() if line.startswith("01 "))
    assert "install" in header and row[-1] == "-"
    assert float(row[6]) > 0 and float(row[-2]) <= float(row[5])  # an install ran; the bite within the total
