"""The 2-hour class's route through the notebooks (sections by heading text, some left for
homework), the check that it runs as written, and its minutes: reading plus stored seconds scaled
to the cold Colab rehearsal. classbook.py writes them where the README and the notebooks state them.
"""
from __future__ import annotations

import ast
import builtins
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab._thirdparty import Jsonable
from chatlab.data import data_path
from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CLASS_NOTEBOOK = NOTEBOOKS / "class.ipynb"
CLASS_MINUTES = 120
DISCUSSION = 15  # minutes of the class no cell or reading takes
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 12
EXERCISE_MINUTES = 4  # writing one exercise's function at home, besides reading its cells
SETUP_PARTS = ("install", "restart", "env", "export")


@dataclass(frozen=True)
class RouteStop:
    """One notebook's part of the class: its number ("01"), the sections run (heading texts),
    subsections of those left for homework, and a note for the teacher (empty for none)."""

    notebook: str
    sections: tuple[str, ...]
    homework: tuple[str, ...] = ()
    note: str = ""


ROUTE: tuple[RouteStop, ...] = (
    RouteStop("01", ("The ChatGLM3 tokenizer", "Step 1 — the template path",
                     "Step 2 — why ChatGLM3 refuses to encode role tokens from text",
                     "Step 3 — the bug on a live model, measured")),
    RouteStop("02", ("ChatGLM3, rendered at the id level", "Injection: the same chat, two paths",
                     "Exporting a template as Jinja")),
    RouteStop("03", ("1. A backend is three calls",
                     "2. The KV cache by hand: `past_key_values` in, `present` out",
                     "3. What the KV cache saves", "5. Stop strings on a live stream", "6. A missing stop, measured"),
              homework=("Exercise 1 · how big is the cache?", "Exercise 2 · the cache is only a shortcut",
                        "Exercise 3 · build it yourself: the stateless forward",
                        "Exercise 5 · build it yourself: a stop matcher with holdback")),
    RouteStop("04", ("The weather tool", "Qwen-1's ReAct prompt (the article's)",
                     "Streaming: what the parser holds back, and why", "A real call from a live model",
                     "Streaming a forced call: a naive relay against the buffered parser, measured",
                     "Run the tool, feed the result back"),
              homework=("The second round: the result continues the assistant's turn",)),
    RouteStop("06", ("The path of one request", "The openai client, unchanged", "Streaming", "A tool call")),
    RouteStop("09", ("The data and the training template", "Training ids, rendered at the id level",
                     "A LoRA, two dozen steps on 2 cores", "Served four ways", "Why: `diff_templates`",
                     "The fix: export the training template, load it as `--chat-template` would"),
              homework=("LMDeploy: the training template as its chat-template JSON",
                        "The certificate: every engine at once"),
              note="start the LoRA cell before the break: it trains for a few minutes"),
)
NUMBERS = ("01", "02", "03", "04", "05", "06", "07", "08", "09")


class RouteError(ChatlabError):
    """A route that cannot run as written, or a class notebook out of sync with the nine."""


@dataclass(frozen=True)
class Piece:
    """A cell, or the part of a markdown cell from one of its headings to the next (`lines`: the
    slice of its lines; None for the whole cell)."""

    cell: int
    lines: tuple[int, int | None] | None = None


@dataclass(frozen=True)
class Section:
    """A heading's text, its level (2 for `##`), the indices of its pieces and of its cells
    (heading included; a `##` section's include its `###` subsections')."""

    title: str
    level: int
    pieces: tuple[int, ...]
    cells: tuple[int, ...]


def notebook_path(number: str, folder: Path = NOTEBOOKS) -> Path:
    found = sorted(folder.glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        raise RouteError(f"route: no single notebook {number}_*.ipynb in {folder} (found {len(found)})")
    return found[0]


def read(number: str, folder: Path = NOTEBOOKS) -> list[nbformat.NotebookNode]:
    import nbformat

    return list(nbformat.read(notebook_path(number, folder), as_version=4).cells)


def _heading(line: str) -> tuple[int, str] | None:
    hashes = len(line) - len(line.lstrip("#"))
    if hashes == 0 or not line[hashes:].startswith(" "):
        return None
    return hashes, line[hashes:].strip()


def pieces(cells: list[nbformat.NotebookNode]) -> list[Piece]:
    """Every cell in order, a markdown cell cut before each heading below its first line."""
    out = []
    for i, cell in enumerate(cells):
        lines = cell.source.splitlines() if cell.cell_type == "markdown" else []
        cuts = [k for k, line in enumerate(lines) if k > 0 and _heading(line)]
        if not cuts:
            out.append(Piece(i))
            continue
        ends: list[int | None] = [*cuts, None]
        out += [Piece(i, span) for span in zip([0, *cuts], ends)]
    return out


def piece_source(piece: Piece, cells: list[nbformat.NotebookNode]) -> str:
    source = cells[piece.cell].source
    if piece.lines is None:
        return str(source)
    return "\n".join(source.splitlines()[piece.lines[0]:piece.lines[1]]).strip("\n")


def sections(cells: list[nbformat.NotebookNode]) -> tuple[tuple[int, ...], list[Section]]:
    """(the setup cells' indices, every section) of a notebook's cells."""
    parts = pieces(cells)
    heads = []
    for k, piece in enumerate(parts):
        if cells[piece.cell].cell_type == "markdown":
            first = piece_source(piece, cells).lstrip().split("\n", 1)[0]
            if (h := _heading(first)) and h[0] >= 2:
                heads.append((k, *h))
    first_k = next((k for k, level, _ in heads if level == 2), len(parts))
    found = []
    for n, (k, level, title) in enumerate(heads):
        if k < first_k:
            continue
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(parts))
        span = tuple(range(k, end))
        found.append(Section(title, level, span, tuple(sorted({parts[j].cell for j in span}))))
    return tuple(sorted({parts[k].cell for k in range(first_k)})), found


def _code(source: str) -> str:
    """A cell's Python: IPython's `%magic` and `!shell` lines left out."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def binds_and_needs(source: str) -> tuple[set[str], set[str]]:
    """(names a code cell binds at any depth, non-builtin names it loads without binding). Coarse
    on purpose: a name bound anywhere in the cell counts as its own."""
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


def _by_title(stop: RouteStop, found: list[Section], titles: tuple[str, ...]) -> list[Section]:
    by_title = {s.title: s for s in found}
    missing = [t for t in titles if t not in by_title]
    if missing:
        raise RouteError(f"route: notebook {stop.notebook} has no section {missing[0]!r}; its sections are: "
                         + "; ".join(repr(s.title) for s in found)
                         + ". Name one of them in chatlab/lab/route.py's ROUTE")
    return [by_title[t] for t in titles]


def route_pieces(stop: RouteStop, cells: list[nbformat.NotebookNode]) -> list[int]:
    """The indices (into `pieces(cells)`) of what a stop runs, setup first, in notebook order."""
    setup, found = sections(cells)
    parts = pieces(cells)
    chosen = {k for k, p in enumerate(parts) if p.cell in setup}
    for s in _by_title(stop, found, stop.sections):
        chosen |= set(s.pieces)
    for s in _by_title(stop, found, stop.homework):
        if not chosen & set(s.pieces):
            raise RouteError(f"route: notebook {stop.notebook}'s homework section {s.title!r} is not inside a "
                             "route section; leave it out of `homework`")
        chosen -= set(s.pieces)
    return sorted(chosen)


def route_cells(stop: RouteStop, cells: list[nbformat.NotebookNode]) -> list[int]:
    """The indices of the cells a stop runs (a markdown cell for any of its pieces), in order."""
    parts = pieces(cells)
    return sorted({parts[k].cell for k in route_pieces(stop, cells)})


def _section_of(index: int, found: list[Section]) -> str:
    inner = [s for s in found if index in s.cells]
    return inner[-1].title if inner else "the setup cells"


def _unbound(label: str, run: list[int], cells: list[nbformat.NotebookNode], found: list[Section],
             checked: set[int] | None = None) -> list[str]:
    """Each use, in the cells `run` in that order (only those in `checked`, all by default), of a
    name that only a cell outside `run` binds."""
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
        for name in sorted(needs - have) if checked is None or i in checked else []:
            outside = [j for j in binders.get(name, []) if j not in run]
            if outside:
                j = max([k for k in outside if k < i] or outside)
                out.append(f"{label}: cell {i} in section {_section_of(i, found)!r} uses {name!r}, which only "
                           f"section {_section_of(j, found)!r} defines (cell {j}, not on the route): add that "
                           "section to the route or define the name in the route's own cells")
        have |= bound
    return out


def problems(stop: RouteStop, cells: list[nbformat.NotebookNode]) -> list[str]:
    """Every use, by a route cell or an exercise run after the route, of a name only a skipped
    cell binds, as sentences."""
    run = route_cells(stop, cells)
    _, found = sections(cells)
    out = _unbound(f"notebook {stop.notebook}", run, cells, found)
    exercises = [s for s in found if s.level >= 3 and s.title.startswith("Exercise ") and not set(s.cells) <= set(run)]
    extra: set[int] = set()
    for s in exercises:
        extra |= set(s.cells)
        parent = next((p for p in reversed(found) if p.level < s.level and s.cells[0] in p.cells), None)
        if parent is not None and parent.title == "Exercises":
            start = min(c.cells[0] for c in found if c.level > parent.level and c.cells[0] in parent.cells)
            extra |= {i for i in parent.cells if i < start}
    if extra:
        out += _unbound(f"notebook {stop.notebook}, the exercises after the route", run + sorted(extra - set(run)),
                        cells, found, {i for s in exercises for i in s.cells})
    return out


# -- the budget --------------------------------------------------------------------------------

def cell_seconds(cell: nbformat.NotebookNode) -> float:
    """A code cell's stored execution time (its execution metadata), 0 where it has none."""
    times = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.fromisoformat(times["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(times["iopub.status.idle"].replace("Z", "+00:00"))
    except (KeyError, ValueError, AttributeError):
        return 0.0
    return max(0.0, (end - start).total_seconds())


@dataclass
class Row:
    """One notebook's row of a cold rehearsal: what `chatlab rehearse` measures and stores as JSON
    under data/bench, and what the route's minutes read back."""

    notebook: str
    cells: int
    setup_s: float = 0.0
    route_s: float = 0.0
    peak_mb: float = 0.0
    problem: str = ""
    cell_indices: tuple[int, ...] = ()  # the notebook's code cells that ran
    parts: dict[str, float] = field(default_factory=dict)  # seconds of SETUP_PARTS measured
    bite_s: float | None = None  # from the start to the end of the first live bite

    @property
    def total_s(self) -> float:
        return self.setup_s + self.route_s

    def to_json(self) -> dict[str, Jsonable]:
        return {"notebook": self.notebook, "cells": self.cells, "setup_s": round(self.setup_s, 1),
                "cell_indices": list(self.cell_indices), "route_s": round(self.route_s, 1),
                "total_s": round(self.total_s, 1), "peak_mb": round(self.peak_mb),
                "parts_s": {k: round(v, 1) for k, v in self.parts.items()},
                "bite_s": None if self.bite_s is None else round(self.bite_s, 1), "problem": self.problem}

    @classmethod
    def from_json(cls, r: dict[str, Jsonable]) -> Row:
        return cls(str(r["notebook"]), r["cells"], r["setup_s"], r["route_s"], r["peak_mb"], r["problem"],
                   tuple(r.get("cell_indices", ())), {str(k): float(v) for k, v in r["parts_s"].items()},
                   r["bite_s"])


@lru_cache(maxsize=2)
def rehearsal(everything: bool = False) -> dict[str, Row]:
    """The cold rehearsal's rows by notebook: of the route, or with `everything` of every cell."""
    found = {}
    bench = data_path("bench")
    files = sorted(bench.glob("rehearse-colab-all-*.json")) if everything else [bench / "rehearse-colab.json"]
    for path in files:
        for row in map(Row.from_json, json.loads(path.read_text())["rows"]):
            if everything:
                row.cell_indices = tuple(i for i, c in enumerate(read(row.notebook)) if c.cell_type == "code")
            found[row.notebook] = row
    return found


def machine_scale(number: str, cells: list[nbformat.NotebookNode], everything: bool = False) -> float:
    """How much slower the rehearsal ran notebook `number`'s cells than the stored run did (the
    set-up parts the class does once and the install cell left out)."""
    row = rehearsal(everything).get(number)
    fix = f"rehearse it (`./run.sh rehearse --colab --cgroup{' --all' if everything else ''} --json data/bench/...`)"
    if row is None or not row.cell_indices:
        raise RouteError(f"route: no rehearsal of notebook {number}'s {'cells' if everything else 'route'} "
                         f"with the cells it ran under data/bench: {fix}")
    first = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    stored = sum(cell_seconds(cells[i]) for i in row.cell_indices if i != first)
    rehearsed = row.setup_s + row.route_s - sum(row.parts.values())
    return max(rehearsed, 0.0) / stored if stored else 1.0


def pieces_minutes(number: str, chosen: list[int], cells: list[nbformat.NotebookNode],
                   scale: float | None = None) -> float:
    """Reading plus scaled machine minutes of the chosen pieces, the badge and set-up cells left out."""
    parts = pieces(cells)
    first = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    scale = machine_scale(number, cells) if scale is None else scale
    total = 0.0
    for k in chosen:
        piece = parts[k]
        if piece.cell in (0, first):
            continue
        cell, text = cells[piece.cell], piece_source(piece, cells)
        if cell.cell_type == "code":
            total += sum(1 for line in text.splitlines() if line.strip()) / CODE_LINES_PER_MINUTE
            total += scale * cell_seconds(cell) / 60
        else:
            total += len(text.split()) / WORDS_PER_MINUTE
    return total


@lru_cache(maxsize=1)
def minutes() -> dict[str, tuple[int, int]]:
    """Each notebook's time in minutes: (in the class, at home: what the route skips, and
    EXERCISE_MINUTES per exercise)."""
    found = {}
    for number in NUMBERS:
        cells = read(number)
        stop = next((s for s in ROUTE if s.notebook == number), None)
        on = route_pieces(stop, cells) if stop else []
        rest = [k for k in range(len(pieces(cells))) if k not in on]
        exercises = sum(s.title.startswith("Exercise ") for s in sections(cells)[1])
        home = pieces_minutes(number, rest, cells, machine_scale(number, cells, number in rehearsal(True)))
        found[number] = (math.ceil(pieces_minutes(number, on, cells)) if stop else 0,
                         math.ceil(home + EXERCISE_MINUTES * exercises))
    return found


def class_setup_minutes() -> int:
    """The class's one set-up: the rehearsal's largest install, restart, environment build and exports."""
    rows = rehearsal().values()
    return math.ceil(sum(max(r.parts.get(p, 0.0) for r in rows) for p in SETUP_PARTS) / 60)


def validate(route: tuple[RouteStop, ...] = ROUTE) -> None:
    """Raise RouteError naming every problem of `route`; ROUTE must also leave DISCUSSION minutes free."""
    found = [problem for stop in route for problem in problems(stop, read(stop.notebook))]
    if route is ROUTE:
        used = class_setup_minutes() + sum(m for m, _ in minutes().values())
        if used > CLASS_MINUTES - DISCUSSION:
            found.append(f"the route takes {used} of the class's {CLASS_MINUTES} minutes, leaving less than "
                         f"{DISCUSSION} for discussion: move a section to homework")
    if found:
        raise RouteError("the route cannot run as written:\n  " + "\n  ".join(found))
