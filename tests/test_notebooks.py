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
    assert re.search(r"^\s*(import|from) .*\bchatlab\b", code[0].source, re.M), "it imports chatlab"
    for cell in code:  # library code belongs in the package; a pydantic schema is the demo's data
        for m in re.finditer(r"^class \w+(\(([^)]*)\))?:", cell.source, re.M):
            assert m.group(2) == "BaseModel", f"{path.name} defines a class in a cell: {m.group(0)}"
    start = time.monotonic()
    NotebookClient(nb, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    print(f"{path.name}: {time.monotonic() - start:.0f} s")
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
