"""`chatlab rehearse`: each notebook's route cells run cold and timed in a fresh kernel from an empty
model store. A cell error, stderr (but BUILD_NOTICES and what its stored output shows) or, with
--cgroup (Binder's 2 GB), an out-of-memory kill fails it. --colab runs each on a cold runtime of the
Colab replica (tests/colab/replica.py), timing the install, its restart, the export env and exports.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from unittest import mock

import psutil

from chatlab.backends.precision import cpu
from chatlab.lab import classbook, route
from chatlab.lab.route import ROUTE, RouteError, RouteStop, Row

if TYPE_CHECKING:
    import nbformat
    from nbclient import NotebookClient

REPO = route.NOTEBOOKS.parent
# stderr lines a cold model store prints once per build: progress, not a problem
BUILD_NOTICES = ("chatlab: exporting ", "chatlab: building the export environment ")
INSTALL_LIMIT = 8_000_000_000  # the Colab install's pip runs on Colab's memory, not Binder's
RESTART_ASKED = "restart the session"  # in the SetupError of a Colab set-up cell that needs one


def plan(stops: tuple[RouteStop, ...], numbers: list[str],
         everything: bool) -> list[tuple[str, list[int], int]]:
    """(notebook, the cell indices to run, how many are setup) per notebook (`numbers`: only those)."""
    out = []
    for number in route.NUMBERS if everything else [s.notebook for s in stops]:
        if numbers and number not in numbers:
            continue
        cells = route.read(number)
        chosen = (list(range(len(cells))) if everything
                  else route.route_cells(next(s for s in stops if s.notebook == number), cells))
        out.append((number, chosen, len(route.sections(cells)[0])))
    return out


def class_plan() -> tuple[str, list[int], int]:
    """The class notebook's plan: every cell, its set-up being the cells the generator adds."""
    import nbformat

    cells = nbformat.read(route.CLASS_NOTEBOOK, as_version=4).cells
    return "class", list(range(len(cells))), sum(str(c.get("id", "")).startswith("class-") for c in cells)


class _Peak(threading.Thread):
    """Samples the resident memory of a notebook's kernel and its descendants; keeps the largest sum."""

    def __init__(self, client: object, number: str) -> None:
        super().__init__(daemon=True)
        pid = getattr(getattr(getattr(client, "km", None), "provisioner", None), "pid", None)
        if not isinstance(pid, int):
            raise RouteError(f"rehearse: the kernel for notebook {number} started without a local process id")
        self.pid, self.peak, self.halt = pid, 0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.halt.is_set():
            with suppress(psutil.Error):
                root = psutil.Process(self.pid)
                total = root.memory_info().rss
                for child in root.children(recursive=True):
                    with suppress(psutil.Error):
                        total += child.memory_info().rss
                self.peak = max(self.peak, total)
            self.halt.wait(0.2)

    def stop(self) -> int:
        self.halt.set()
        self.join()
        return self.peak


def kill_children(pid: int) -> None:
    """End what a kernel left running, so that nothing writes into the store after it is removed."""
    with suppress(psutil.Error):
        children = psutil.Process(pid).children(recursive=True)
        for child in children:
            with suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(children, timeout=10)


STORED_STDERR = "chatlab_stored_stderr"  # metadata: a cell's stored stderr, the lesson and not a fault


def _stderr_lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines()
            if line.strip() and not line.startswith(BUILD_NOTICES)]


def _stderr_or_error(cell: nbformat.NotebookNode) -> str:
    expected = set(cell.get("metadata", {}).get(STORED_STDERR, []))
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            return f"{out.ename}: {out.evalue}"
        if out.output_type == "stream" and out.name == "stderr":
            if lines := [line for line in _stderr_lines(out.text) if line not in expected]:
                return "stderr: " + lines[-1][:200]
    return ""


def is_bite(cell: nbformat.NotebookNode) -> bool:
    """A cell that runs one of the lessons' live bites (chatlab.lab.evals.bites)."""
    return cell.cell_type == "code" and "_bite(" in cell.source


def fresh_copy(number: str, chosen: list[int]) -> tuple[nbformat.NotebookNode, Row]:
    """The chosen cells of notebook `number`, outputs cleared (stored stderr kept), and their empty row."""
    import nbformat

    source = nbformat.read(route.CLASS_NOTEBOOK if number == "class" else route.notebook_path(number),
                           as_version=4)
    nb = nbformat.v4.new_notebook(metadata=source.metadata)
    nb.cells = [source.cells[i] for i in chosen]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.metadata[STORED_STDERR] = [
                line for out in cell.outputs if out.output_type == "stream" and out.name == "stderr"
                for line in _stderr_lines(out.text)]
            cell.outputs, cell.execution_count = [], None
    return nb, Row(number, sum(c.cell_type == "code" for c in nb.cells),
                   cell_indices=tuple(i for i in chosen if source.cells[i].cell_type == "code"))


def book_cell(row: Row, cell: nbformat.NotebookNode, setup: bool, start: float, began: float,
              number: int) -> bool:
    """Book a cell that just ran into `row`; False, with `row.problem` set, when it failed or wrote stderr."""
    now = time.perf_counter()
    if setup:
        row.setup_s = now - start
    else:
        row.route_s += now - began
    if row.bite_s is None and is_bite(cell):
        row.bite_s = now - start
    if problem := _stderr_or_error(cell):
        row.problem = f"cell {number}: {problem}"
        return False
    return True


def first_code_cell(cells: list[nbformat.NotebookNode]) -> int:
    found = next((k for k, c in enumerate(cells) if c.cell_type == "code"), None)
    if found is None or "from chatlab.lab.session import setup" not in cells[found].source:
        raise RouteError("rehearse --colab: the notebook's first code cell is not the set-up cell")
    return found


def asks_restart(cell: nbformat.NotebookNode) -> bool:
    """The Colab set-up cell stopped only to ask for the restart after replacing a loaded package."""
    errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
    return len(errors) == 1 and errors[0].ename == "SetupError" and RESTART_ASKED in errors[0].evalue


def run_notebook(number: str, chosen: list[int], n_setup: int, kernel_name: str = "python3",
                 cgroup: object | None = None, colab: Path | None = None) -> Row:
    """Run the chosen cells of notebook `number` in one fresh kernel; stop at the first failure.
    `colab`: the replica's working folder; the install is timed and rerun after its restart."""
    from nbclient import NotebookClient

    nb, row = fresh_copy(number, chosen)
    first = first_code_cell(nb.cells) if colab is not None else -1
    client = NotebookClient(nb, timeout=1800, kernel_name=kernel_name, allow_errors=True,
                            resources={"metadata": {"path": str(colab or route.NOTEBOOKS)}})
    peak, start = 0, time.perf_counter()
    with client.setup_kernel():
        sampler = _Peak(client, number)
        try:
            for k, cell in enumerate(nb.cells):
                t = time.perf_counter()
                client.execute_cell(cell, k)
                if k == first:
                    row.parts["install"] = time.perf_counter() - start
                    if asks_restart(cell):
                        peak = max(peak, sampler.stop())
                        t = time.perf_counter()
                        sampler = restart_and_rerun(client, cell, k, number, cgroup)
                        row.parts["restart"] = time.perf_counter() - t
                    shown = "".join(o.get("text", "") for o in cell.get("outputs", []))
                    if "(colab), Python 3.13" not in shown and not _stderr_or_error(cell):
                        row.problem = f"cell {chosen[k]}: the set-up cell did not report a Colab session"
                        break
                if not book_cell(row, cell, k < n_setup, start, t, chosen[k]):
                    break
        finally:
            row.peak_mb = max(peak, sampler.stop()) / 1e6
            kill_children(sampler.pid)
    if cgroup is not None and cgroup.oom_kills:  # type: ignore[attr-defined]
        row.problem = row.problem or "the 2 GB cgroup killed a process (out of memory)"
    return row


def restart_and_rerun(client: NotebookClient, cell: nbformat.NotebookNode, index: int, number: str,
                      cgroup: object | None) -> _Peak:
    """Restart the kernel, rerun the set-up cell (in Binder's limit from here on); a new sampler."""
    from nbclient.util import run_sync

    if cgroup is not None:
        limit = str(_tests_module("kernel_cgroup").LIMIT_BYTES)
        (cgroup.path / "memory.limit_in_bytes").write_text(limit)  # type: ignore[attr-defined]
    run_sync(getattr(client.km, "restart_kernel"))(now=True)  # nbclient's async manager and client
    run_sync(getattr(client.kc, "wait_for_ready"))(timeout=120)
    sampler = _Peak(client, number)
    cell.outputs = []
    client.execute_cell(cell, index)
    return sampler


def table(rows: list[Row]) -> str:
    """One line per notebook and a total; the setup's parts and the first bite where measured."""
    parts = [p for p in route.SETUP_PARTS if any(p in r.parts for r in rows)]
    bite = any(r.bite_s is not None for r in rows)
    extra = "".join(f"{p + ' s':>10}" for p in parts) + (f"{'bite s':>9}" if bite else "")

    def cells(r: Row) -> str:
        text = "".join(f"{r.parts[p]:>10.1f}" if p in r.parts else f"{'-':>10}" for p in parts)
        return text + ((f"{r.bite_s:>9.1f}" if r.bite_s is not None else f"{'-':>9}") if bite else "")

    lines = [f"{'notebook':<9}{'cells':>6}{'setup s':>9}{'route s':>9}{'peak MB':>9}{'total s':>9}{extra}  problem"]
    for r in rows:
        lines.append(f"{r.notebook:<9}{r.cells:>6}{r.setup_s:>9.1f}{r.route_s:>9.1f}{r.peak_mb:>9.0f}"
                     f"{r.total_s:>9.1f}{cells(r)}  {r.problem or '-'}")
    sums = "".join(f"{sum(r.parts.get(p, 0.0) for r in rows):>10.1f}" for p in parts)
    lines.append(f"{'total':<9}{sum(r.cells for r in rows):>6}{sum(r.setup_s for r in rows):>9.1f}"
                 f"{sum(r.route_s for r in rows):>9.1f}{max((r.peak_mb for r in rows), default=0):>9.0f}"
                 f"{sum(r.total_s for r in rows):>9.1f}{sums}")
    return "\n".join(lines)


class LocalRunner:
    """One notebook's chosen cells in a fresh kernel of this Python, in a 2 GB cgroup when asked."""

    def prepare(self) -> None:
        pass

    def __call__(self, number: str, cells: list[int], n_setup: int, home: Path, cgroup: bool) -> Row:
        group, kernel = cgroup_kernel(home / "jupyter", "rehearse") if cgroup else (None, "python3")
        try:
            return run_notebook(number, cells, n_setup, kernel, group)
        finally:
            if group is not None:
                group.remove()  # type: ignore[attr-defined]


def _tests_module(name: str) -> ModuleType:
    """A helper module of the test suite (tests/ or tests/colab/)."""
    sys.path[:0] = [str(f) for f in (REPO / "tests" / "colab", REPO / "tests") if str(f) not in sys.path]
    return importlib.import_module(name)


def cgroup_kernel(folder: Path, tag: str, python: str = sys.executable, limit: int | None = None,
                  extra: tuple[str, ...] = ()) -> tuple[object, str]:
    """A fresh memory cgroup (Binder's 2 GB, or `limit` bytes) and a kernel spec under `folder` that
    starts `python`'s kernel inside it (tests/kernel_cgroup.py); exits where none can be made."""
    cgroups = _tests_module("kernel_cgroup")
    made = cgroups.make(tag, limit or cgroups.LIMIT_BYTES)
    if isinstance(made, str):
        raise SystemExit(f"rehearse --cgroup: {made}")
    name = made.kernel_spec(folder, python, extra=extra)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("JUPYTER_PATH")]))
    return made, name


def build_seconds(home: Path) -> dict[str, float]:
    """`env`: the export environment's build time; `export`: the exports' recorded seconds."""
    found: dict[str, float] = {}
    for stamp in (home / "export-env").glob("py*/.chatlab-export-env"):  # written when the build ended
        if (cfg := stamp.parent / "pyvenv.cfg").is_file():
            found["env"] = found.get("env", 0.0) + stamp.stat().st_mtime - cfg.stat().st_mtime
    for manifest in home.glob("**/chatlab-export.json"):
        with suppress(OSError, ValueError):
            if isinstance(seconds := json.loads(manifest.read_text()).get("seconds"), (int, float)):
                found["export"] = found.get("export", 0.0) + float(seconds)
    return found


class ColabRunner:
    """Each notebook on a cold runtime of the Colab replica (see the module docstring)."""

    def __init__(self, venv: Path | None = None) -> None:
        self.venv = venv or Path(os.environ.get("CHATLAB_COLAB_VENV") or REPO / ".venv313-colab")
        self.replica = _tests_module("replica")
        self.python = self.venv / "bin" / "python"

    def prepare(self) -> None:
        """Build the replica where it is missing or stale (minutes, once)."""
        python = self.replica.python313()
        if python is None and not self.python.is_file():
            raise SystemExit("rehearse --colab: no Python 3.13 for the Colab replica (python3.13 on PATH, "
                             "pyenv's 3.13.x, or CHATLAB_COLAB_PYTHON)")
        self.replica.build(self.venv, python or str(self.python))

    def kernel(self, folder: Path, cgroup: bool) -> tuple[object | None, str]:
        """A kernel spec of the replica's Python told it is on Colab, in a cgroup when asked."""
        if cgroup:
            return cgroup_kernel(folder, "rehearse-colab", str(self.python), INSTALL_LIMIT,
                                 (self.replica.AS_ON_COLAB,))
        spec = folder / "kernels" / "colab-replica"
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     self.replica.AS_ON_COLAB], "display_name": "Colab replica", "language": "python"}))
        return None, "colab-replica"

    def __call__(self, number: str, cells: list[int], n_setup: int, home: Path, cgroup: bool) -> Row:
        t = time.perf_counter()
        self.replica.reset(self.venv)
        print(f"rehearse: {number}: the replica reset to Colab's packages in {time.perf_counter() - t:.0f} s",
              file=sys.stderr, flush=True)
        runtime = home / f"runtime-{number}"
        content, store = runtime / "content", runtime / "chatlab-home"
        shutil.copytree(REPO, content / "chatlab", ignore=shutil.ignore_patterns(*self.replica.NOT_CLONED))
        with mock.patch.dict(os.environ, CHATLAB_HOME=str(store), CHATLAB_CLONE=str(content / "chatlab"),
                             CHATLAB_REPO="https://invalid.example/not-cloned",  # the copy is the clone
                             JUPYTER_PATH=str(runtime / "jupyter")):
            os.environ.pop("PYTHONPATH", None)  # the kernel imports chatlab from the clone, as on Colab
            group, kernel = self.kernel(runtime / "jupyter", cgroup)
            try:
                row = run_notebook(number, cells, n_setup, kernel, group, content)
                row.parts.update(build_seconds(store))
                return row
            finally:
                if group is not None:
                    group.remove()  # type: ignore[attr-defined]
                shutil.rmtree(runtime, ignore_errors=True)


def rehearse(numbers: list[str], everything: bool = False, dry_run: bool = False,
             cgroup: bool = False, stops: tuple[RouteStop, ...] = ROUTE,
             runner: LocalRunner | ColabRunner | None = None, report: Path | None = None,
             klass: bool = False) -> int:
    """Validate, then run; the exit status (0 clean, 1 a cell failed, 2 the route is wrong).
    `report`: a JSON file for the rows; `klass`: run the class notebook instead."""
    try:
        route.validate(stops)
        if klass and (numbers or everything):
            raise RouteError("rehearse --class runs the whole class notebook: leave out --all and notebook numbers")
        if unknown := sorted(set(numbers) - set(route.NUMBERS)):
            raise RouteError(f"rehearse: no notebook {unknown[0]}; the notebooks are {', '.join(route.NUMBERS)}")
        if (off := sorted(set(numbers) - {s.notebook for s in stops})) and not everything:
            raise RouteError(f"rehearse: notebook {off[0]} is not on the route; --all {off[0]} runs all of it")
        todo = plan(stops, numbers, everything)
        if klass:
            classbook.check_class_notebook()
            todo = [class_plan()]
    except RouteError as err:
        print(err, file=sys.stderr)
        return 2
    if dry_run:
        for number, cells, n_setup in todo:
            print(f"{number}: {len(cells)} cells ({n_setup} setup): {cells}")
        return 0
    runner = runner or LocalRunner()
    runner.prepare()
    rows: list[Row] = []
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="chatlab-rehearse-", ignore_cleanup_errors=True) as tmp, \
            mock.patch.dict(os.environ, CHATLAB_HOME=str(Path(tmp) / "store"), HF_HUB_OFFLINE="1",
                            TOKENIZERS_PARALLELISM="false", PYTHONPATH=pythonpath):
        for number, cells, n_setup in todo:
            rows.append(runner(number, cells, n_setup, Path(tmp), cgroup))
            print(f"rehearse: {number} done in {rows[-1].total_s:.0f} s{': ' + rows[-1].problem if rows[-1].problem else ''}",
                  file=sys.stderr, flush=True)
    print(table(rows))
    if report is not None:
        write_report(report, rows, type(runner).__name__, everything, cgroup)
    return 1 if any(r.problem for r in rows) else 0


def write_report(path: Path, rows: list[Row], runner: str, everything: bool, cgroup: bool) -> None:
    """The rows as JSON, with the machine (CPU, cores, memory) and the date."""
    here = cpu()
    data = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "runner": runner,
            "cells": "all" if everything else "class" if [r.notebook for r in rows] == ["class"] else "route",
            "cgroup_2gb": cgroup,
            # pip's wheel cache makes an install download nothing; a fresh Colab runtime has none
            "pip_cache": os.environ.get("PIP_NO_CACHE_DIR", "").lower() not in ("1", "true", "yes", "on"),
            "machine": {"cpu": here.model, "cores": here.threads, "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
                        "python": platform.python_version()},
            "rows": [r.to_json() for r in rows],
            "total_s": round(sum(r.total_s for r in rows), 1), "table": table(rows).splitlines()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
