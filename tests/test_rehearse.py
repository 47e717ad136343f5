"""`./run.sh rehearse` (chatlab/lab/rehearse.py): a wrong route is refused before any kernel
starts, an interrupted rehearsal leaves no model store behind, and (slow) a notebook's route
runs as its own cell sequence in a fresh kernel from an empty store."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from chatlab.lab import rehearse as rh
from chatlab.lab import route
from chatlab.lab.route import ROUTE


def _no_kernel(*args: object, **kwargs: object) -> rh.Row:
    raise AssertionError("a kernel was started for a route that does not validate")


def test_a_wrong_route_fails_before_anything_runs(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(rh, "run_notebook", _no_kernel)
    broken = tuple(replace(s, sections=s.sections[1:]) if s.notebook == "04" else s for s in ROUTE)
    assert rh.rehearse([], stops=broken) == 2
    err = capsys.readouterr().err
    assert "uses 'TOOLS', which only section 'The weather tool' defines" in err
    missing = tuple(replace(s, sections=("No such heading",)) if s.notebook == "02" else s for s in ROUTE)
    assert rh.rehearse([], stops=missing) == 2
    assert "notebook 02 has no section 'No such heading'" in capsys.readouterr().err
    assert rh.rehearse(["05"]) == 2
    assert "notebook 05 is not on the route" in capsys.readouterr().err


def test_dry_run_lists_the_route_cells_and_runs_nothing(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(rh, "run_notebook", _no_kernel)
    assert rh.rehearse(["02"], dry_run=True) == 0
    out = capsys.readouterr().out
    assert out.startswith("02: 14 cells (4 setup): [0, 1, 2, 3, ")
    assert ", 10," not in out and "11," not in out  # the resolution chain is homework


def test_dry_run_of_the_class_notebook_checks_it_and_runs_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    import nbformat

    monkeypatch.setattr(rh, "run_notebook", _no_kernel)
    assert rh.rehearse([], dry_run=True, klass=True) == 0
    cells = nbformat.read(rh.route.CLASS_NOTEBOOK, as_version=4).cells
    assert capsys.readouterr().out.startswith(f"class: {len(cells)} cells (3 setup): [0, 1, 2, 3, ")
    assert rh.first_code_cell(cells) == 1   # the one set-up cell a Colab rehearsal installs from
    stale = nbformat.read(rh.route.CLASS_NOTEBOOK, as_version=4)
    stale.cells.pop()
    nbformat.write(stale, tmp_path / "class.ipynb")
    monkeypatch.setattr(rh.route, "CLASS_NOTEBOOK", tmp_path / "class.ipynb")
    assert rh.rehearse([], klass=True) == 2
    assert "regenerate it with `chatlab class-notebook`" in capsys.readouterr().err
    assert rh.rehearse(["01"], klass=True, dry_run=True) == 2


def test_an_interrupted_rehearsal_removes_its_model_store(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []

    def half_built(number: str, *args: object) -> rh.Row:
        store = Path(os.environ["CHATLAB_HOME"])
        (store / "models" / "half").mkdir(parents=True)
        (store / "models" / "half" / "model.safetensors").write_bytes(b"\0" * 10)
        seen.append(store)
        raise KeyboardInterrupt

    before = os.environ.get("CHATLAB_HOME")
    monkeypatch.setattr(rh, "run_notebook", half_built)
    with pytest.raises(KeyboardInterrupt):
        rh.rehearse(["01"])
    assert seen and not seen[0].exists() and not seen[0].parent.exists()
    assert os.environ.get("CHATLAB_HOME") == before


def test_the_table_sums_and_names_problems() -> None:
    rows = [rh.Row("01", 10, 2.0, 30.0, 900.0), rh.Row("02", 5, 1.5, 4.0, 700.0, "cell 13: NameError: smol")]
    text = rh.table(rows)
    assert "cell 13: NameError: smol" in text
    assert text.splitlines()[-1].split() == ["total", "15", "3.5", "34.0", "900", "37.5"]


def test_cells_are_booked_as_setup_route_and_bite_and_stderr_stops_the_run() -> None:
    import time

    import nbformat

    nb, row = rh.fresh_copy("01", [0, 1, 2])
    assert row.cells == sum(c.cell_type == "code" for c in nb.cells)
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")
    now = time.perf_counter()
    setup = nbformat.v4.new_code_cell("setup()")
    assert rh.book_cell(row, setup, True, now - 5, now - 1, 1) and 5 <= row.setup_s < 6
    bite = nbformat.v4.new_code_cell("show_bite(engine)")
    assert rh.book_cell(row, bite, False, now - 5, now - 2, 4)
    assert row.bite_s is not None and 5 <= row.bite_s < 6
    assert 2 <= row.route_s < 3 and 5 <= row.setup_s < 6
    noisy = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stderr", text="oops\n")])
    assert not rh.book_cell(row, noisy, False, now - 5, now - 1, 7)
    assert row.problem == "cell 7: stderr: oops" and 3 <= row.route_s < 4


def test_a_refusal_the_stored_notebook_shows_is_expected_other_stderr_is_not() -> None:
    """04 shows `chatlab complete` refusing an unknown tool_choice: that stored stderr line is the
    lesson; any other stderr line from the same cell still fails the run."""
    import time

    import nbformat

    cells = nbformat.read(rh.route.notebook_path("04"), as_version=4).cells
    shown = next(i for i, c in enumerate(cells) if c.cell_type == "code" and any(
        o.output_type == "stream" and o.name == "stderr" for o in c.outputs))
    refusal = next(o.text for o in cells[shown].outputs if o.output_type == "stream" and o.name == "stderr")
    assert "unknown tool_choice" in refusal
    nb, row = rh.fresh_copy("04", [shown])
    cell, now = nb.cells[0], time.perf_counter()
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=refusal)]
    assert rh.book_cell(row, cell, False, now - 2, now - 1, shown) and row.problem == ""
    cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text="Traceback: boom\n"))
    assert not rh.book_cell(row, cell, False, now - 2, now - 1, shown)
    assert row.problem == f"cell {shown}: stderr: Traceback: boom"


@pytest.mark.slow
def test_notebook_02s_route_runs_in_a_fresh_kernel_from_an_empty_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert rh.rehearse(["02"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("02 "))
    stop = next(s for s in ROUTE if s.notebook == "02")
    cells = nbformat.read(route.notebook_path("02"), as_version=4).cells
    code = [i for i in route.route_cells(stop, cells) if cells[i].cell_type == "code"]
    assert row[1] == str(len(code)) and row[-1] == "-"  # every route code cell ran, no problem


def test_what_a_kernel_left_running_is_ended() -> None:
    import subprocess
    import sys
    import time

    import psutil

    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"])
    try:
        for _ in range(100):
            children = psutil.Process(parent.pid).children(recursive=True)
            if children:
                break
            time.sleep(0.05)
        assert children
        rh.kill_children(parent.pid)
        assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
        assert parent.poll() is None  # the kernel itself is nbclient's to shut down
    finally:
        parent.kill()
        parent.wait()
