"""The 2-hour class's route through the notebooks, defined once.

`ROUTE` names, for each notebook the class visits, the sections it runs (by their heading text)
and the minutes they take; `MINUTES` gives every notebook's whole time, class and home. The
README's route table, notebook 01's and each notebook's time line are rendered from here.

A notebook's cells before the first `##` heading are its setup (always run); each `##` or `###`
heading starts a section that runs up to the next heading of the same or a higher level.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@dataclass(frozen=True)
class RouteStop:
    """One notebook's part of the class: its number ("01"), the sections run (heading texts),
    the minutes they take, and a note for the teacher (empty for none)."""

    notebook: str
    minutes: int
    sections: tuple[str, ...]
    note: str = ""


ROUTE: tuple[RouteStop, ...] = (
    RouteStop("01", 25, ("The ChatGLM3 tokenizer", "Step 1 — the template path",
                         "Step 2 — why ChatGLM3 refuses to encode role tokens from text",
                         "Step 3 — the bug on a live model, measured")),
    RouteStop("02", 15, ("ChatGLM3, rendered at the id level", "Injection: the same chat, two paths")),
    RouteStop("03", 25, ("1. A backend is three calls",
                         "2. The KV cache by hand: `past_key_values` in, `present` out",
                         "5. Stop strings on a live stream", "6. A missing stop, measured")),
    RouteStop("04", 20, ("The weather tool", "Streaming: what the parser holds back, and why",
                         "A real call from a live model",
                         "Streaming a forced call: a naive relay against the buffered parser, measured")),
    RouteStop("06", 15, ("The path of one request", "The openai client, unchanged", "Streaming",
                         "A tool call")),
    RouteStop("09", 20, ("The data and the training template", "Training ids, rendered at the id level",
                         "A LoRA, two dozen steps on 2 cores", "Served four ways", "Why: `diff_templates`",
                         "The fix: export the training template, load it as `--chat-template` would"),
              note="start the LoRA cell before the break: it trains for a few minutes"),
)

# Each notebook's whole time in minutes: (in the class, at home: the rest and the exercises).
MINUTES: dict[str, tuple[int, int]] = {
    "01": (25, 15), "02": (15, 20), "03": (25, 30), "04": (20, 30), "05": (0, 35),
    "06": (15, 15), "07": (0, 25), "08": (0, 25), "09": (20, 25),
}


class RouteError(ChatlabError):
    """A route that cannot run as written: a section that does not exist, or a route cell that
    needs a name only a skipped section defines."""


@dataclass(frozen=True)
class Section:
    """A heading's text, its level (2 for `##`) and the indices of its cells (heading included;
    a `##` section's cells include its `###` subsections')."""

    title: str
    level: int
    cells: tuple[int, ...]


def notebook_path(number: str, folder: Path = NOTEBOOKS) -> Path:
    found = sorted(folder.glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        raise RouteError(f"route: no single notebook {number}_*.ipynb in {folder} (found {len(found)})")
    return found[0]


def _heading(cell: nbformat.NotebookNode) -> tuple[int, str] | None:
    if cell.cell_type != "markdown":
        return None
    first = cell.source.lstrip().split("\n", 1)[0]
    hashes = len(first) - len(first.lstrip("#"))
    if hashes == 0 or not first[hashes:].startswith(" "):
        return None
    return hashes, first[hashes:].strip()


def sections(cells: list[nbformat.NotebookNode]) -> tuple[tuple[int, ...], list[Section]]:
    """(the setup cells' indices, every section) of a notebook's cells."""
    heads = [(i, *h) for i, c in enumerate(cells) if (h := _heading(c)) and h[0] >= 2]
    first = next((i for i, level, _ in heads if level == 2), len(cells))
    found = []
    for k, (i, level, title) in enumerate(heads):
        if i < first:
            continue
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(cells))
        found.append(Section(title, level, tuple(range(i, end))))
    return tuple(range(first)), found


def _code(source: str) -> str:
    """A cell's Python: IPython's `%magic` and `!shell` lines left out."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def binds_and_needs(source: str) -> tuple[set[str], set[str]]:
    """(names a code cell binds at any depth, names it loads that it does not bind itself and
    that are not builtins). A name bound anywhere in the cell counts as the cell's own: the
    reading is coarse on purpose, never flagging a name the cell could have made."""
    tree = ast.parse(_code(source))
    bound: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return bound, loaded - bound - set(dir(builtins)) - {"display", "get_ipython"}


def route_cells(stop: RouteStop, cells: list[nbformat.NotebookNode]) -> list[int]:
    """The indices of the cells a stop runs, setup first, in notebook order."""
    setup, found = sections(cells)
    by_title = {s.title: s for s in found}
    missing = [t for t in stop.sections if t not in by_title]
    if missing:
        raise RouteError(f"route: notebook {stop.notebook} has no section {missing[0]!r}; its sections are: "
                         + "; ".join(repr(s.title) for s in found))
    chosen = set(setup).union(*(by_title[t].cells for t in stop.sections))
    return sorted(chosen)


def _section_of(index: int, found: list[Section]) -> str:
    inner = [s for s in found if index in s.cells]
    return inner[-1].title if inner else "the setup cells"


def problems(stop: RouteStop, cells: list[nbformat.NotebookNode]) -> list[str]:
    """Every route cell's use of a name that only a skipped cell binds, as sentences."""
    run = route_cells(stop, cells)
    _, found = sections(cells)
    binders: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        if c.cell_type == "code":
            for name in binds_and_needs(c.source)[0]:
                binders.setdefault(name, []).append(i)
    have: set[str] = set()
    out = []
    for i in run:
        if cells[i].cell_type != "code":
            continue
        bound, needs = binds_and_needs(cells[i].source)
        for name in sorted(needs - have):
            earlier = [j for j in binders.get(name, []) if j < i and j not in run]
            if earlier:
                out.append(f"notebook {stop.notebook}: cell {i} in section {_section_of(i, found)!r} uses "
                           f"{name!r}, which only section {_section_of(earlier[-1], found)!r} defines "
                           f"(cell {earlier[-1]}, not on the route): add that section to the route or "
                           "define the name in the route's own cells")
        have |= bound
    return out


def validate(route: tuple[RouteStop, ...] = ROUTE, folder: Path = NOTEBOOKS) -> None:
    """Raise RouteError naming every problem of `route` against the notebooks in `folder`."""
    import nbformat

    found = []
    for stop in route:
        cells = nbformat.read(notebook_path(stop.notebook, folder), as_version=4).cells
        found += problems(stop, cells)
    total = sum(stop.minutes for stop in route)
    if route is ROUTE and total != 120:
        found.append(f"the route's minutes add up to {total}, not the class's 120")
    if found:
        raise RouteError("the route cannot run as written:\n  " + "\n  ".join(found))


def route_table(route: tuple[RouteStop, ...] = ROUTE) -> str:
    """The route as a markdown table: minutes, then notebook · sections (and the note)."""
    rows = ["| minutes | notebook · sections |", "|---:|---|"]
    for stop in route:
        note = f" ({stop.note})" if stop.note else ""
        rows.append(f"| {stop.minutes} | **{stop.notebook}** · {'; '.join(stop.sections)}{note} |")
    return "\n".join(rows)


def time_line(number: str) -> str:
    """The time a notebook states under its title."""
    in_class, at_home = MINUTES[number]
    if in_class == 0:
        return (f"**Time:** about {at_home} minutes, exercises included; the 2-hour class leaves this "
                "notebook for homework.")
    stop = next(s for s in ROUTE if s.notebook == number)
    return (f"**Time:** about {in_class + at_home} minutes: {in_class} in the 2-hour class ("
            f"{'; '.join(stop.sections)}), {at_home} at home for the rest and the exercises.")
