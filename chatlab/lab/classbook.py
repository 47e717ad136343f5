"""What the route writes: its table and the course's time in the README and notebook 01, each
notebook's time line, and notebooks/class.ipynb (every route section in order after one set-up).
`chatlab class-notebook` writes them; `--check` and the tests hold the stored ones to the route.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab.lab import route
from chatlab.lab.route import CLASS_MINUTES, NOTEBOOKS, NUMBERS, ROUTE, RouteError, RouteStop

if TYPE_CHECKING:
    import nbformat

GENERATE_FIX = "regenerate it with `chatlab class-notebook` and commit notebooks/class.ipynb"


def route_table(stops: tuple[RouteStop, ...] = ROUTE) -> str:
    """The route as a markdown table, the set-up first and the discussion time last."""
    setup, minutes = route.class_setup_minutes(), route.minutes()
    rows = ["| minutes | notebook · sections |", "|---:|---|",
            f"| {setup} | set-up: one install, one restart, the exports built once |"]
    for stop in stops:
        note = f" ({stop.note})" if stop.note else ""
        home = f"; at home: {'; '.join(stop.homework)}" if stop.homework else ""
        sections = "; ".join(stop.sections)
        rows.append(f"| {minutes[stop.notebook][0]} | **{stop.notebook}** · {sections}{note}{home} |")
    left = CLASS_MINUTES - setup - sum(m for m, _ in minutes.values())
    rows.append(f"| {left} | questions and discussion |")
    return "\n".join(rows)


def course_line() -> str:
    """The whole course's time, as the README states it."""
    home = sum(b for _, b in route.minutes().values())
    total = CLASS_MINUTES + home
    return (f"The nine notebooks take about {total} minutes (about {round(total / 60)} hours): "
            f"the {CLASS_MINUTES}-minute class below and {home} at home")


def time_line(number: str) -> str:
    """The time a notebook states under its title."""
    in_class, at_home = route.minutes()[number]
    if in_class == 0:
        return (f"**Time:** about {at_home} minutes, exercises included; the 2-hour class leaves this "
                "notebook for homework.")
    stop = next(s for s in ROUTE if s.notebook == number)
    return (f"**Time:** about {in_class + at_home} minutes: {in_class} in the 2-hour class ("
            f"{'; '.join(stop.sections)}), {at_home} at home for the rest and the exercises.")


MODEL_PARAMETER = '''\
# The model for the whole class: a store name (`chatlab models`), a local folder or a hub id.
CHATLAB_MODEL = "smollm2-135m-instruct"  # @param {type:"string"}
import os
os.environ["CHATLAB_MODEL"] = CHATLAB_MODEL
'''
BUILD_EXPORTS = '''\
# Build the OpenVINO exports the class uses, once (minutes on a fresh runtime; start it, then talk).
from chatlab.backends import load_backend
from chatlab.lab import explicit_kv
from chatlab.lab.session import release
from chatlab.models import default_model

for name in sorted({"smollm2-135m-instruct", default_model()}):
    load_backend(name, backend="openvino", weight_format="int8")
explicit_kv.load(default_model())
SET_UP = {*globals(), "SET_UP"}  # what the set-up defined: kept when each notebook's objects go
print("exports ready")'''
RELEASE = '''\
# One kernel runs the whole class, in as little as Binder's 2 GB: {done}'s objects go before {next} begins.
release(globals(), keep=SET_UP)'''


def _cell(source: nbformat.NotebookNode, text: str, cell_id: str) -> nbformat.NotebookNode:
    cell = copy.deepcopy(source)
    cell.source = text
    cell.id = cell_id
    return cell


def class_notebook(stops: tuple[RouteStop, ...] = ROUTE, folder: Path = NOTEBOOKS) -> nbformat.NotebookNode:
    """One notebook for the whole class: an opening (badges, the route table), one set-up cell, one
    cell that builds the exports, then every route stop's cells with their stored outputs."""
    import nbformat

    first = nbformat.read(route.notebook_path(stops[0].notebook, folder), as_version=4)
    bootstrap = next(c for c in first.cells if c.cell_type == "code")
    badge = re.sub(r"notebooks(/|%2F)[0-9]{2}_[A-Za-z0-9_]+\.ipynb",
                   lambda m: f"notebooks{m.group(1)}{route.CLASS_NOTEBOOK.name}",
                   first.cells[0].source.split("\n\n", 1)[0])
    opening = (f"{badge}\n\n# The 2-hour class: every route section of the nine notebooks, in order\n\n"
               "Generated from `chatlab/lab/route.py` by `chatlab class-notebook`; edit the nine notebooks, "
               "not this one. Set the model in the next cell, run it (on Colab it installs chatlab and asks "
               "for one restart: restart, run it again), then run the cell that builds the exports and "
               "start talking. Between notebooks a cell lets the last one's models go, so one kernel holds "
               f"the whole class.\n\n{route_table(stops)}")
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(first.metadata))
    nb.metadata.pop("widgets", None)
    nb.cells = [nbformat.v4.new_markdown_cell(opening, id="class-opening"),
                _cell(bootstrap, MODEL_PARAMETER + bootstrap.source, "class-setup"),
                nbformat.v4.new_code_cell(BUILD_EXPORTS, id="class-exports")]
    for before, stop in zip((None, *stops), stops):
        if before is not None:
            nb.cells.append(nbformat.v4.new_code_cell(RELEASE.format(done=before.notebook, next=stop.notebook),
                                                      id=f"release-{before.notebook}"))
        cells = route.read(stop.notebook, folder)
        parts = route.pieces(cells)
        setup_cell = next(i for i, c in enumerate(cells) if c.cell_type == "code")
        for k in route.route_pieces(stop, cells):
            piece = parts[k]
            if piece.cell in (0, setup_cell):
                continue
            suffix = "" if piece.lines is None else f"-{piece.lines[0]}"
            nb.cells.append(_cell(cells[piece.cell], route.piece_source(piece, cells),
                                  f"nb{stop.notebook}-c{piece.cell}{suffix}"))
    return nb


def check_class_notebook(path: Path | None = None) -> None:
    """Raise RouteError where the stored class notebook is not what the route generates."""
    import nbformat

    path = path or route.CLASS_NOTEBOOK
    if not path.is_file():
        raise RouteError(f"{path} does not exist: {GENERATE_FIX}")
    stored = nbformat.read(path, as_version=4).cells
    fresh = class_notebook().cells
    for k, (a, b) in enumerate(zip(stored, fresh)):
        kept, made = [(c.cell_type, c.source, c.get("outputs"), c.get("id")) for c in (a, b)]
        if kept != made:
            raise RouteError(f"{path.name} is out of sync with the nine notebooks at cell {k} "
                             f"({b.get('id')}): {GENERATE_FIX}")
    if len(stored) != len(fresh):
        raise RouteError(f"{path.name} has {len(stored)} cells where the route gives {len(fresh)}: "
                         f"{GENERATE_FIX}")


def write_class_notebook(path: Path | None = None) -> Path:
    import nbformat

    path = path or route.CLASS_NOTEBOOK
    nbformat.write(class_notebook(), path)
    return path


COURSE_LINE = re.compile(r"The nine notebooks take about \d+ minutes \(about \d+ hours\): "
                         r"the \d+-minute class below and \d+ at home")
TIME_LINE = re.compile(r"\*\*Time:\*\* about .*?(?:homework\.|exercises\.)", re.S)
TABLE = re.compile(r"\| minutes \| notebook · sections \|\n(?:\|.*\|\n?)+")


def _rewrite(text: str) -> str:
    text = TABLE.sub(lambda m: route_table() + ("\n" if m.group(0).endswith("\n") else ""), text)
    return COURSE_LINE.sub(lambda m: course_line(), text)


def write_route_text(readme: Path = NOTEBOOKS.parent / "README.md", folder: Path = NOTEBOOKS) -> list[Path]:
    """Write the route's minutes where they are stated until they agree with what they measure
    (01's table counts in its own minutes); the files changed."""
    import nbformat

    changed: set[Path] = set()
    for _ in range(5):
        route.minutes.cache_clear()
        moved: set[Path] = set()
        for number in NUMBERS:
            path = route.notebook_path(number, folder)
            nb = nbformat.read(path, as_version=4)
            before = [cell.source for cell in nb.cells]
            for cell in nb.cells:
                if cell.cell_type == "markdown" and cell.source.startswith("# "):
                    cell.source = TIME_LINE.sub(lambda m: time_line(number), cell.source)
                if cell.cell_type == "markdown" and number == "01":
                    cell.source = _rewrite(cell.source)
            if [cell.source for cell in nb.cells] != before:
                nbformat.write(nb, path)
                moved.add(path)
        text = readme.read_text()
        if (new := _rewrite(text)) != text:
            readme.write_text(new)
            moved.add(readme)
        if not moved:
            return sorted(changed)
        changed |= moved
    raise RouteError("the route's minutes did not settle after five rewrites of the notebooks' time lines")
