"""Every notebook runs top to bottom, offline, in a fresh kernel, and stays a notebook:
narrative and calls into chatlab, not library code."""
from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest

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
    assert re.search(r"^(import|from) .*\bchatlab\b", code[0].source, re.M), "it imports chatlab"
    for cell in code:  # library code belongs in the package; a pydantic schema is the demo's data
        for m in re.finditer(r"^class \w+(\(([^)]*)\))?:", cell.source, re.M):
            assert m.group(2) == "BaseModel", f"{path.name} defines a class in a cell: {m.group(0)}"
    start = time.monotonic()
    NotebookClient(nb, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    print(f"{path.name}: {time.monotonic() - start:.0f} s")
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
