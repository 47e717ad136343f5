"""The 2-hour route (chatlab/lab/route.py): it runs as written, the README's and notebook 01's
tables and each notebook's time line are rendered from it, and a broken route is refused with
an error naming the section and the name."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from chatlab.lab import route
from chatlab.lab.route import ROUTE, RouteError, RouteStop

ROOT = Path(__file__).resolve().parents[1]


def _stop(number: str) -> RouteStop:
    return next(s for s in ROUTE if s.notebook == number)


def test_the_route_validates_and_fills_the_class() -> None:
    route.validate()
    assert sum(s.minutes for s in ROUTE) == 120
    assert all(route.MINUTES[s.notebook][0] == s.minutes for s in ROUTE)


def test_readme_and_notebook_01_show_the_generated_table() -> None:
    table = route.route_table()
    assert table in (ROOT / "README.md").read_text()
    cells = nbformat.read(route.notebook_path("01"), as_version=4).cells
    assert [c for c in cells if c.cell_type == "markdown" and table in c.source], \
        "notebook 01's route cell does not hold route.route_table()"


@pytest.mark.parametrize("number", sorted(route.MINUTES))
def test_each_notebook_states_its_minutes_under_its_title(number: str) -> None:
    cells = nbformat.read(route.notebook_path(number), as_version=4).cells
    title = next(c for c in cells if c.cell_type == "markdown" and c.source.startswith("# "))
    assert route.time_line(number) in title.source


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
    stop = RouteStop("xx", 1, ("A.1", "B"))
    assert route.route_cells(stop, cells) == [0, 1, 2, 5, 6, 7, 8]
    assert re.search(r"cell 6 in section 'A.1' uses 'a', which only section 'A' defines",
                     route.problems(stop, cells)[0])
