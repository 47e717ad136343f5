"""The 2-hour route (chatlab/lab/route.py): it runs as written, the README's and notebook 01's
tables and each notebook's time line are rendered from it, and a broken route is refused with
an error naming the section and the name."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from chatlab.lab import classbook, route
from chatlab.lab.route import ROUTE, RouteError, RouteStop

ROOT = Path(__file__).resolve().parents[1]


def _stop(number: str) -> RouteStop:
    return next(s for s in ROUTE if s.notebook == number)


def test_the_route_validates_and_leaves_time_for_discussion() -> None:
    route.validate()
    used = route.class_setup_minutes() + sum(route.minutes()[s.notebook][0] for s in ROUTE)
    assert used <= route.CLASS_MINUTES - route.DISCUSSION
    assert classbook.route_table().endswith(f"| {route.CLASS_MINUTES - used} | questions and discussion |")
    assert all(route.minutes()[n][0] == 0 for n in route.NUMBERS if n not in {s.notebook for s in ROUTE})


def test_readme_and_notebook_01_show_the_generated_table_and_course_time() -> None:
    table = classbook.route_table()
    readme = (ROOT / "README.md").read_text()
    assert table in readme and classbook.course_line() in readme
    assert "about 3 hours" not in readme
    cells = nbformat.read(route.notebook_path("01"), as_version=4).cells
    assert [c for c in cells if c.cell_type == "markdown" and table in c.source and classbook.course_line() in c.source], \
        "notebook 01's route cell does not hold classbook.route_table() and classbook.course_line()"


def test_a_section_costs_its_reading_and_its_scaled_machine_time() -> None:
    """200 words a minute, 12 code lines a minute, and the stored seconds times the notebook's
    rehearsal scale."""
    run = nbformat.v4.new_code_cell("a = 1\n\nb = 2\n" * 4)   # 8 code lines
    run.metadata["execution"] = {"iopub.execute_input": "2026-12-04T02:10:00.000000Z",
                                 "iopub.status.idle": "2026-12-04T02:10:30.000000Z"}
    cells = [nbformat.v4.new_markdown_cell("badge"), nbformat.v4.new_code_cell("setup()"),
             nbformat.v4.new_markdown_cell("## A\n" + "word " * 398), run]   # 400 words
    assert route.cell_seconds(run) == 30.0
    minutes = route.pieces_minutes("xx", [2, 3], cells, scale=4.0)
    assert minutes == pytest.approx(400 / 200 + 8 / 12 + 4 * 30 / 60)
    assert route.pieces_minutes("xx", [0, 1], cells, scale=4.0) == 0   # the badge and set-up: the class's own


def test_the_machine_scale_comes_from_the_rehearsal_of_the_cells_it_ran() -> None:
    row = route.rehearsal()["09"]
    cells = route.read("09")
    stored = sum(route.cell_seconds(cells[i]) for i in row.cell_indices if i != 1)
    rehearsed = row.setup_s + row.route_s - sum(row.parts.values())
    assert route.machine_scale("09", cells) == pytest.approx(rehearsed / stored)
    assert route.machine_scale("09", cells) > 1   # the replica in 2 GB is slower than the store's run
    every = route.rehearsal(everything=True)["05"]
    cells = route.read("05")
    assert every.cell_indices == tuple(i for i, c in enumerate(cells) if c.cell_type == "code")
    stored = sum(route.cell_seconds(cells[i]) for i in every.cell_indices[1:])
    assert route.machine_scale("05", cells, everything=True) == pytest.approx(
        (every.setup_s + every.route_s - sum(every.parts.values())) / stored)
    with pytest.raises(RouteError, match="no rehearsal of notebook 01's cells .*rehearse it"):
        route.machine_scale("01", route.read("01"), everything=True)


@pytest.mark.parametrize("number", route.NUMBERS)
def test_each_notebook_states_its_minutes_under_its_title(number: str) -> None:
    cells = nbformat.read(route.notebook_path(number), as_version=4).cells
    title = next(c for c in cells if c.cell_type == "markdown" and c.source.startswith("# "))
    assert classbook.time_line(number) in title.source


def test_a_section_that_does_not_exist_is_named() -> None:
    bad = (replace(_stop("02"), sections=("ChatGLM3, rendered at the id level", "Injection, two paths")),)
    with pytest.raises(RouteError, match=r"notebook 02 has no section 'Injection, two paths'.*'The resolution chain'"):
        route.validate(bad)


def test_a_name_defined_only_in_a_skipped_section_is_named_with_both_sections() -> None:
    without_tools = tuple(s for s in _stop("04").sections if s != "The weather tool")
    bad = (replace(_stop("04"), sections=without_tools),)
    with pytest.raises(RouteError) as err:
        route.validate(bad)
    text = str(err.value)
    assert "uses 'TOOLS', which only section 'The weather tool' defines" in text
    assert "'QUESTION'" in text and "A real call from a live model" in text


def test_the_check_reads_names_bound_and_needed() -> None:
    bound, needs = route.binds_and_needs(
        "import numpy as np\n%time x = 1\nfor i in range(3):\n    y = np.sum(z) + len(w)\n"
        "def f(a):\n    return a + g\n[k for k in q]\n")
    assert {"np", "i", "y", "f", "a", "k"} <= bound
    assert needs == {"z", "w", "g", "q"}


def test_sections_nest_and_setup_comes_first() -> None:
    cells = [nbformat.v4.new_code_cell("import os"), nbformat.v4.new_markdown_cell("# Title"),
             nbformat.v4.new_markdown_cell("### note before the first section"),
             nbformat.v4.new_markdown_cell("## A"), nbformat.v4.new_code_cell("a = 1"),
             nbformat.v4.new_markdown_cell("### A.1"), nbformat.v4.new_code_cell("b = a"),
             nbformat.v4.new_markdown_cell("## B"), nbformat.v4.new_code_cell("print(b)")]
    setup, found = route.sections(cells)
    assert setup == (0, 1, 2)
    assert [(s.title, s.cells) for s in found] == [("A", (3, 4, 5, 6)), ("A.1", (5, 6)), ("B", (7, 8))]
    stop = RouteStop("xx", ("A.1", "B"))
    assert route.route_cells(stop, cells) == [0, 1, 2, 5, 6, 7, 8]
    assert re.search(r"cell 6 in section 'A.1' uses 'a', which only section 'A' defines",
                     route.problems(stop, cells)[0])


def test_every_heading_in_a_cell_starts_a_section() -> None:
    """04's cells 19 and 40 end the section above with prose and open the next one below it."""
    cells = route.read("04")
    _, found = route.sections(cells)
    by_title = {s.title: s for s in found}
    assert by_title["ReAct: a final answer"].cells[0] == 19 and 19 in by_title["ReAct: a call"].cells
    assert by_title["The optional Qwen2.5 model"].cells[0] == 40
    assert 40 in by_title["Run the tool, feed the result back"].cells
    cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_markdown_cell("## A\ntext of A"),
             nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_markdown_cell("end of A\n\n## B\ntext of B"),
             nbformat.v4.new_code_cell("b = 2")]
    _, found = route.sections(cells)
    assert [(s.title, s.cells) for s in found] == [("A", (1, 2, 3)), ("B", (3, 4))]
    parts = route.pieces(cells)
    assert [route.piece_source(parts[k], cells) for k in found[1].pieces][:1] == ["## B\ntext of B"]
    assert route.piece_source(parts[found[0].pieces[-1]], cells) == "end of A"


@pytest.mark.parametrize(("number", "section", "name", "cell"), [
    ("02", "Exporting a template as Jinja", "tokenizer_for", 17),
    ("03", "3. What the KV cache saves", "check", 15),
    ("04", "Qwen-1's ReAct prompt (the article's)", "StopMatcher", 11),
    ("04", "Run the tool, feed the result back", "validate_arguments", 37),
])
def test_exercises_after_the_route_need_no_skipped_section(number: str, section: str, name: str, cell: int) -> None:
    stop = _stop(number)
    without = replace(stop, sections=tuple(s for s in stop.sections if s != section),
                      homework=tuple(h for h in stop.homework if h.startswith("Exercise 5")))
    with pytest.raises(RouteError) as err:
        route.validate((without,))
    assert f"the exercises after the route: cell" in str(err.value)
    assert f"uses {name!r}, which only section {section!r} defines (cell {cell}," in str(err.value)


def test_build_it_yourself_and_the_certificate_are_homework() -> None:
    on_03 = route.route_cells(_stop("03"), route.read("03"))
    assert 41 in on_03 and not {45, 46, 47, 48} & set(on_03)   # 5.'s stream stays, Exercise 5 goes home
    on_09 = route.route_cells(_stop("09"), route.read("09"))
    assert {25, 26, 27, 28} <= set(on_09) and not set(range(29, 35)) & set(on_09)


def test_homework_outside_the_route_is_named() -> None:
    bad = (replace(_stop("03"), homework=("Exercise 4 · how many tokens does top-p keep?",)),)
    with pytest.raises(RouteError, match="homework section 'Exercise 4 .*' is not inside a route section"):
        route.validate(bad)


def test_the_stored_class_notebook_is_in_sync() -> None:
    classbook.check_class_notebook()


def test_the_class_notebook_has_one_setup_then_the_route_in_order() -> None:
    nb = classbook.class_notebook()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert sum("from chatlab.lab.session import setup" in c.source for c in code) == 1
    assert code[0].source.startswith(classbook.MODEL_PARAMETER) and "@param" in code[0].source
    assert code[1].source == classbook.BUILD_EXPORTS
    assert "before starting Jupyter" not in nb.cells[0].source
    ids = [c.id for c in nb.cells if c.id.startswith("nb")]
    expected = [f"nb{s.notebook}-c{route.pieces(route.read(s.notebook))[k].cell}" for s in ROUTE
                for k in route.route_pieces(s, route.read(s.notebook))
                if route.pieces(route.read(s.notebook))[k].cell not in (0, 1)]
    assert [i.split("-")[0] + "-" + i.split("-")[1] for i in ids] == expected
    stored = route.read("03")
    copied = next(c for c in nb.cells if c.id == "nb03-c50")
    assert copied.outputs == stored[50].outputs and copied.outputs


def test_each_notebook_after_the_first_begins_by_releasing_the_one_before() -> None:
    nb = classbook.class_notebook()
    parts = [c.id.split("-")[0].removeprefix("nb") if c.id.startswith("nb") else c.id for c in nb.cells]
    for a, b in zip(ROUTE, ROUTE[1:]):
        at = parts.index(f"release-{a.notebook}")
        assert parts[at - 1] == a.notebook and parts[at + 1] == b.notebook  # between the two, nowhere else
        assert "release(globals(), keep=SET_UP)" in nb.cells[at].source
    assert sum(p.startswith("release-") for p in parts) == len(ROUTE) - 1
    assert "SET_UP = {*globals()" in nb.cells[2].source and "import release" in nb.cells[2].source


def test_a_class_notebook_out_of_sync_is_refused_naming_the_fix(tmp_path: Path) -> None:
    nb = classbook.class_notebook()
    nb.cells[10].source += "\n# edited by hand"
    path = tmp_path / "class.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RouteError, match=r"out of sync with the nine notebooks at cell 10 .*chatlab class-notebook"):
        classbook.check_class_notebook(path)
    with pytest.raises(RouteError, match="does not exist: regenerate it with `chatlab class-notebook`"):
        classbook.check_class_notebook(tmp_path / "missing.ipynb")


def test_the_cli_checks_and_writes_the_class_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from chatlab.cli import main

    assert main(["class-notebook", "--check"]) == 0
    monkeypatch.setattr(route, "CLASS_NOTEBOOK", tmp_path / "class.ipynb")
    assert main(["class-notebook", "--check"]) == 1
    assert "regenerate it with `chatlab class-notebook`" in capsys.readouterr().out
    assert main(["class-notebook"]) == 0 and main(["class-notebook", "--check"]) == 0


def test_stale_minutes_are_rewritten_where_they_are_stated(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "notebooks"
    folder.mkdir()
    for number in route.NUMBERS:
        shutil.copy(route.notebook_path(number), folder)
    readme = tmp_path / "README.md"
    fresh = (ROOT / "README.md").read_text()
    readme.write_text(fresh.replace(classbook.course_line(), "The nine notebooks take about 3 minutes (about 0 hours): "
                                    "the 120-minute class below and 1 at home"))
    nb = nbformat.read(folder / route.notebook_path("03").name, as_version=4)
    title = next(c for c in nb.cells if c.source.startswith("# 03"))
    title.source = title.source.replace(classbook.time_line("03"), "**Time:** about 1 minutes, exercises included; "
                                        "the 2-hour class leaves this notebook for homework.")
    nbformat.write(nb, folder / route.notebook_path("03").name)
    changed = classbook.write_route_text(readme, folder)
    assert changed == sorted([readme, folder / route.notebook_path("03").name])
    assert readme.read_text() == fresh
    assert classbook.time_line("03") in nbformat.read(folder / route.notebook_path("03").name, as_version=4).cells[2].source


def test_the_stored_class_rehearsal_is_of_this_notebook_with_one_install_and_the_readme_quotes_it() -> None:
    """The cold rehearsal of the class notebook (one kernel, one install, Binder's 2 GB) ran every
    code cell of the notebook as it stands, without a problem, in at most 20 minutes of machine
    time; the README's figures are that run's."""
    import json

    run = json.loads((ROOT / "data" / "bench" / "rehearse-class-colab.json").read_text())
    [row] = run["rows"]  # one runtime: one install, one restart
    assert run["cells"] == "class" and run["cgroup_2gb"] and row["problem"] == ""
    assert set(row["parts_s"]) == set(route.SETUP_PARTS) and row["parts_s"]["install"] > 0
    cells = nbformat.read(route.CLASS_NOTEBOOK, as_version=4).cells
    assert row["cells"] == sum(c.cell_type == "code" for c in cells), \
        "the class notebook changed since its rehearsal: ./run.sh rehearse --colab --cgroup --class --json ..."
    assert row["total_s"] <= 20 * 60
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (f"it took {row['total_s'] / 60:.1f} minutes of machine time: {row['setup_s'] / 60:.1f} of set-up and "
            f"{row['route_s'] / 60:.1f} of route cells") in readme
