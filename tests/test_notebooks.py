"""Every notebook runs top to bottom, offline, in a fresh kernel, and stays a notebook:
narrative and calls into chatlab, not library code."""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import nbformat
import pytest

# Binder gives a session 2 GB; the kernel and everything it starts must stay under 1.8 GB
# (decimal, the stricter reading), leaving room for the Jupyter server itself.
PEAK_LIMIT_BYTES = 1_800_000_000


def tree_memory(root: "psutil.Process") -> tuple[int, int]:  # noqa: F821 - imported lazily
    """(PSS, RSS) summed over `root`'s descendants (the kernels it started and their workers).

    PSS is what the limit is checked against: Binder's limit is a cgroup's, which charges each
    physical page once, and PSS splits a page shared by k processes into k parts, so the sum over
    the tree counts each shared library or mmapped weight file once. RSS counts it once per
    process: a notebook with three workers that all map libopenvino would be charged three times
    for it. Both are printed. Processes that end between listing and reading are skipped."""
    import psutil

    pss = rss = 0
    for proc in root.children(recursive=True):
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        pss += getattr(info, "pss", info.rss)  # PSS is Linux-only; RSS elsewhere (an upper bound)
        rss += info.rss
    return pss, rss


class PeakMemory:
    """Samples the memory of this process's descendants every `interval` s in a thread and keeps
    the peaks. The kernel is a child of the test process (nbclient launches it), so the
    descendants are exactly the kernel tree: servers, bench workers and exports included."""

    def __init__(self, interval: float = 0.2) -> None:
        import psutil

        self.root, self.interval = psutil.Process(os.getpid()), interval
        self.peak_pss = self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pss, rss = tree_memory(self.root)
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_offline(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient import NotebookClient

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code"
    assert "version" in code[0].source.lower(), "the first code cell prints versions"
    assert re.search(r"^\s*(import|from) .*\bchatlab\b", code[0].source, re.M), "it imports chatlab"
    for cell in code:  # library code belongs in the package; a pydantic schema is the demo's data
        for m in re.finditer(r"^class \w+(\(([^)]*)\))?:", cell.source, re.M):
            assert m.group(2) == "BaseModel", f"{path.name} defines a class in a cell: {m.group(0)}"
    start = time.monotonic()
    with PeakMemory() as mem:
        try:
            NotebookClient(nb, kernel_name="python3", timeout=600,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        finally:  # printed on failure too: a cell that fails may be the one that ran out of memory
            print(f"{path.name}: {time.monotonic() - start:.0f} s, kernel tree peak "
                  f"{mem.peak_pss / 1e6:,.0f} MB PSS ({mem.peak_rss / 1e6:,.0f} MB summed RSS)")
    limit = PEAK_LIMIT_BYTES
    assert mem.peak_pss <= limit, (
        f"{path.name}: the kernel process tree peaked at {mem.peak_pss / 1e6:,.0f} MB (PSS; "
        f"{mem.peak_rss / 1e6:,.0f} MB summed RSS), over Binder's budget of "
        f"{limit / 1e6:,.0f} MB: free each model before loading the next, and keep "
        "workers to one or two")
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_starts_with_badges_and_the_one_bootstrap(path: Path) -> None:
    """Every notebook opens the same way: badges for Colab and Binder, then the one setup cell
    (identical everywhere, so a fix to it is a fix to all), and reads data through the package."""
    from chatlab.session import BOOTSTRAP, badge_cell

    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source == badge_cell(path.name)
    assert f"notebooks/{path.name}" in nb.cells[0].source and f"notebooks%2F{path.name}" in nb.cells[0].source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == BOOTSTRAP, f"{path.name}: the first code cell is not chatlab.session.BOOTSTRAP"
    for cell in code:
        assert not re.search(r"""["']\.\.["']|\.\./""", cell.source), f"{path.name} reads a path relative to ..: use chatlab.data_path"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "03" <= p.name[:2] <= "08"],
                         ids=lambda p: p.stem)
def test_the_chat_model_comes_from_chatlab_model(path: Path) -> None:
    """Notebooks 03-08 take their model from CHATLAB_MODEL (default_model), never a literal."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "default_model()" in code
    literal = [line for line in code.splitlines() if re.search(r"""["']smollm2-135m-instruct["']""", line)]
    assert not literal, f"{path.name} names the model literally: {literal}"


def test_peak_memory_sees_a_grandchild_allocation() -> None:
    """The sampler counts descendants, not only children: a notebook's server or bench worker
    is the kernel's child, the test process's grandchild. 300 MB written in a grandchild."""
    import subprocess
    import sys

    grandchild = "b = bytearray(300_000_000); import time; time.sleep(1.5)"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    with PeakMemory(interval=0.05) as mem:
        subprocess.run([sys.executable, "-c", child], check=True)
    assert 300_000_000 <= mem.peak_pss < 600_000_000, mem.peak_pss
    assert mem.peak_rss >= mem.peak_pss
