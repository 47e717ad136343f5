"""The rehearsal on the Colab replica (`./run.sh rehearse --colab`): each notebook as a learner
opens it from its Colab badge, on a cold runtime.

The replica is tests/colab/replica.py's Python 3.13 venv of Colab's own package list (.venv313-colab,
or the venv CHATLAB_COLAB_VENV names). Per notebook: the replica goes back to its packages as built;
a copy of this working tree takes the clone's place, with an empty CHATLAB_HOME; a kernel of the
replica (told it is on Colab) runs the first cell, the install (`install` seconds), and where it
asks for a restart, restarts and runs it again (`restart` seconds); then the other setup cells and
the route cells run as in the plain rehearsal.

The export environment's build (`env`) and the OpenVINO exports (`export`) are read from what they
leave in CHATLAB_HOME; they sit inside the setup or route seconds of the cell that asked for the
model. With --cgroup the install runs under INSTALL_LIMIT, then Binder's 2 GB from the restart on.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat

from chatlab.lab.rehearse import (REPO, Row, RouteError, _stderr_or_error, _tests_module, book_cell,
                                  fresh_copy, kernel_sampler, kill_children, oom_problem, restore_env)

INSTALL_LIMIT = 8_000_000_000  # the install's pip runs on Colab's memory, not Binder's
RESTART_ASKED = "restart the session"


def first_code_cell(cells: list[nbformat.NotebookNode]) -> int:
    """The index of the set-up cell (the first code cell), among the chosen cells."""
    found = next((k for k, c in enumerate(cells) if c.cell_type == "code"), None)
    if found is None or "from chatlab.lab.session import setup" not in cells[found].source:
        raise RouteError("rehearse --colab: the notebook's first code cell is not the set-up cell")
    return found


def outputs_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}\n" for o in cell.get("outputs", []))


def asks_restart(cell: nbformat.NotebookNode) -> bool:
    """The first cell stopped only to ask for the restart after replacing a loaded package."""
    errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
    return len(errors) == 1 and errors[0].ename == "SetupError" and RESTART_ASKED in errors[0].evalue


def build_seconds(home: Path) -> dict[str, float]:
    """`env`: the export environment's build (its stamp's time less its first file's), `export`:
    the exports' own recorded seconds, summed; each only where it happened."""
    found: dict[str, float] = {}
    for env in (home / "export-env").glob("py*"):
        stamp = env / ".chatlab-export-env"
        if stamp.is_file() and (env / "pyvenv.cfg").is_file():
            found["env"] = found.get("env", 0.0) + stamp.stat().st_mtime - (env / "pyvenv.cfg").stat().st_mtime
    for manifest in home.glob("**/chatlab-export.json"):
        try:
            seconds = json.loads(manifest.read_text()).get("seconds")
        except (OSError, ValueError):
            continue
        if isinstance(seconds, (int, float)):
            found["export"] = found.get("export", 0.0) + float(seconds)
    return found


class ColabRunner:
    """Runs each notebook on a cold runtime of the Colab replica (see the module docstring)."""

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
            made = _tests_module("kernel_cgroup").make("rehearse-colab", limit=INSTALL_LIMIT)
            if isinstance(made, str):
                raise SystemExit(f"rehearse --colab --cgroup: {made}")
            return made, made.kernel_spec(folder, str(self.python), extra=(self.replica.AS_ON_COLAB,))
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
        saved = {k: os.environ.get(k) for k in ("CHATLAB_HOME", "CHATLAB_CLONE", "CHATLAB_REPO", "PYTHONPATH",
                                                "JUPYTER_PATH")}
        os.environ.update(CHATLAB_HOME=str(store), CHATLAB_CLONE=str(content / "chatlab"),
                          CHATLAB_REPO="https://invalid.example/not-cloned",  # the copy is the clone
                          JUPYTER_PATH=str(runtime / "jupyter"))
        os.environ.pop("PYTHONPATH", None)  # the kernel imports chatlab from the clone, as on Colab
        group, kernel = self.kernel(runtime / "jupyter", cgroup)
        try:
            row = run_on_replica(number, cells, n_setup, kernel, content, group)
            row.parts.update(build_seconds(store))
            return row
        finally:
            if group is not None:
                group.remove()  # type: ignore[attr-defined]
            restore_env(saved)
            shutil.rmtree(runtime, ignore_errors=True)


def run_on_replica(number: str, chosen: list[int], n_setup: int, kernel_name: str, cwd: Path,
                   cgroup: object | None = None) -> Row:
    """The chosen cells of notebook `number` in a kernel `kernel_name` of the replica, the first
    cell's install and its restart included; stop at the first failure."""
    from nbclient import NotebookClient
    from nbclient.util import run_sync

    nb, row = fresh_copy(number, chosen)
    first = first_code_cell(nb.cells)
    client = NotebookClient(nb, timeout=1800, kernel_name=kernel_name, allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    peak = 0
    start = time.perf_counter()
    with client.setup_kernel():
        sample = kernel_sampler(client, number)
        try:
            for k, cell in enumerate(nb.cells):
                t = time.perf_counter()
                client.execute_cell(cell, k)
                if k == first:
                    row.parts["install"] = time.perf_counter() - start
                    if asks_restart(cell):
                        if cgroup is not None:  # Binder's limit from here on
                            limit = str(_tests_module("kernel_cgroup").LIMIT_BYTES)
                            (cgroup.path / "memory.limit_in_bytes").write_text(limit)  # type: ignore[attr-defined]
                        peak = max(peak, sample.stop())
                        t = time.perf_counter()
                        # the async manager and client nbclient made (typed as their sync bases)
                        run_sync(getattr(client.km, "restart_kernel"))(now=True)
                        run_sync(getattr(client.kc, "wait_for_ready"))(timeout=120)
                        sample = kernel_sampler(client, number)
                        cell.outputs = []
                        client.execute_cell(cell, k)
                        row.parts["restart"] = time.perf_counter() - t
                    if "(colab), Python 3.13" not in outputs_text(cell) and not _stderr_or_error(cell):
                        row.problem = f"cell {chosen[k]}: the set-up cell did not report a Colab session"
                        break
                if not book_cell(row, cell, k < n_setup, start, t, chosen[k]):
                    break
        finally:
            peak = max(peak, sample.stop())
            row.peak_mb = peak / 1e6
            kill_children(sample.pid)
    oom_problem(row, cgroup)
    return row
