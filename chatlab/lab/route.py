"""The 2-hour class's route through the notebooks, its budget, and the class notebook built from it.

`ROUTE` names, per notebook, the sections the class runs (by heading text) and those left for
homework; a `##`/`###` heading starts a section that runs to the next heading of its level or
higher. A section's minutes: its reading plus its cells' stored seconds, scaled to the cold Colab
rehearsal. The README's route table, each notebook's time line and notebooks/class.ipynb are
written from here.
"""
from __future__ import annotations

import ast
import builtins
import copy
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab.data import data_path
from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CLASS_NOTEBOOK = NOTEBOOKS / "class.ipynb"
REHEARSAL = ("bench", "rehearse-colab.json")  # under the data folder
CLASS_MINUTES = 120
DISCUSSION = 15  # minutes of the class no cell or reading takes
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 12
EXERCISE_MINUTES = 4  # writing one exercise's function at home, besides reading its cells
SETUP_PARTS = ("install", "restart", "env", "export")
GENERATE_FIX = "regenerate it with `chatlab class-notebook` and commit notebooks/class.ipynb"


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
        bounds: list[int | None] = [0, *cuts, None]
        out += [Piece(i, (int(bounds[k] or 0), bounds[k + 1])) for k in range(len(bounds) - 1)]
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


def reading_minutes(text: str, code: bool) -> float:
    if code:
        return sum(1 for line in text.splitlines() if line.strip()) / CODE_LINES_PER_MINUTE
    return len(text.split()) / WORDS_PER_MINUTE


@dataclass(frozen=True)
class Rehearsed:
    """One notebook's row of the cold rehearsal."""

    setup_s: float
    route_s: float
    parts: dict[str, float]
    cell_indices: tuple[int, ...]


@lru_cache(maxsize=2)
def rehearsal(everything: bool = False) -> dict[str, Rehearsed]:
    """The cold rehearsal's rows by notebook: of the route, or with `everything` of every cell."""
    found = {}
    files = sorted(data_path(REHEARSAL[0]).glob("rehearse-colab-all-*.json")) if everything else [data_path(*REHEARSAL)]
    for path in files:
        for r in json.loads(path.read_text())["rows"]:
            number = str(r["notebook"])
            indices = (tuple(i for i, c in enumerate(read(number)) if c.cell_type == "code") if everything
                       else tuple(int(i) for i in r.get("cell_indices", [])))
            found[number] = Rehearsed(float(r["setup_s"]), float(r["route_s"]),
                                      {str(k): float(v) for k, v in r["parts_s"].items()}, indices)
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
        cell = cells[piece.cell]
        total += reading_minutes(piece_source(piece, cells), cell.cell_type == "code")
        if cell.cell_type == "code":
            total += scale * cell_seconds(cell) / 60
    return total


def home_minutes(number: str) -> int:
    """What a notebook leaves for home: what the route skips, and EXERCISE_MINUTES per exercise."""
    cells = read(number)
    stop = next((s for s in ROUTE if s.notebook == number), None)
    on = set(route_pieces(stop, cells)) if stop else set()
    rest = [k for k in range(len(pieces(cells))) if k not in on]
    exercises = sum(s.title.startswith("Exercise ") for s in sections(cells)[1])
    return math.ceil(pieces_minutes(number, rest, cells, machine_scale(number, cells, number in rehearsal(True)))
                     + EXERCISE_MINUTES * exercises)


@lru_cache(maxsize=1)
def minutes() -> dict[str, tuple[int, int]]:
    """Each notebook's time in minutes: (in the class, at home)."""
    on = {}
    for stop in ROUTE:
        cells = read(stop.notebook)
        on[stop.notebook] = math.ceil(pieces_minutes(stop.notebook, route_pieces(stop, cells), cells))
    return {n: (on.get(n, 0), home_minutes(n)) for n in NUMBERS}


def class_setup_minutes() -> int:
    """The class's one set-up: the rehearsal's largest install, restart, environment build and exports."""
    rows = rehearsal().values()
    return math.ceil(sum(max(r.parts.get(p, 0.0) for r in rows) for p in SETUP_PARTS) / 60)


def validate(route: tuple[RouteStop, ...] = ROUTE, folder: Path = NOTEBOOKS) -> None:
    """Raise RouteError naming every problem of `route`; ROUTE must also leave DISCUSSION minutes free."""
    found = []
    for stop in route:
        found += problems(stop, read(stop.notebook, folder))
    if route is ROUTE and folder == NOTEBOOKS:
        used = class_setup_minutes() + sum(m for m, _ in minutes().values())
        if used > CLASS_MINUTES - DISCUSSION:
            found.append(f"the route takes {used} of the class's {CLASS_MINUTES} minutes, leaving less than "
                         f"{DISCUSSION} for discussion: move a section to homework")
    if found:
        raise RouteError("the route cannot run as written:\n  " + "\n  ".join(found))


# -- what the README and the notebooks say -----------------------------------------------------

def route_table(route: tuple[RouteStop, ...] = ROUTE) -> str:
    """The route as a markdown table, the set-up first and the discussion time last."""
    rows = ["| minutes | notebook · sections |", "|---:|---|",
            f"| {class_setup_minutes()} | set-up: one install, one restart, the exports built once |"]
    for stop in route:
        note = f" ({stop.note})" if stop.note else ""
        home = f"; at home: {'; '.join(stop.homework)}" if stop.homework else ""
        rows.append(f"| {minutes()[stop.notebook][0]} | **{stop.notebook}** · {'; '.join(stop.sections)}{note}{home} |")
    left = CLASS_MINUTES - class_setup_minutes() - sum(m for m, _ in minutes().values())
    rows.append(f"| {left} | questions and discussion |")
    return "\n".join(rows)


def course_line() -> str:
    """The whole course's time, as the README states it."""
    home = sum(b for _, b in minutes().values())
    total = CLASS_MINUTES + home
    return (f"The nine notebooks take about {total} minutes (about {round(total / 60)} hours): "
            f"the {CLASS_MINUTES}-minute class below and {home} at home")


def time_line(number: str) -> str:
    """The time a notebook states under its title."""
    in_class, at_home = minutes()[number]
    if in_class == 0:
        return (f"**Time:** about {at_home} minutes, exercises included; the 2-hour class leaves this "
                "notebook for homework.")
    stop = next(s for s in ROUTE if s.notebook == number)
    return (f"**Time:** about {in_class + at_home} minutes: {in_class} in the 2-hour class ("
            f"{'; '.join(stop.sections)}), {at_home} at home for the rest and the exercises.")


# -- the class notebook ------------------------------------------------------------------------

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


def class_notebook(route: tuple[RouteStop, ...] = ROUTE, folder: Path = NOTEBOOKS) -> nbformat.NotebookNode:
    """One notebook for the whole class: an opening (badges, the route table), one set-up cell, one
    cell that builds the exports, then every route stop's cells with their stored outputs."""
    import nbformat

    first = nbformat.read(notebook_path(route[0].notebook, folder), as_version=4)
    bootstrap = next(c for c in first.cells if c.cell_type == "code")
    badge = re.sub(r"notebooks(/|%2F)[0-9]{2}_[A-Za-z0-9_]+\.ipynb", lambda m: f"notebooks{m.group(1)}{CLASS_NOTEBOOK.name}",
                   first.cells[0].source.split("\n\n", 1)[0])
    opening = (f"{badge}\n\n# The 2-hour class: every route section of the nine notebooks, in order\n\n"
               "Generated from `chatlab/lab/route.py` by `chatlab class-notebook`; edit the nine notebooks, "
               "not this one. Set the model in the next cell, run it (on Colab it installs chatlab and asks "
               "for one restart: restart, run it again), then run the cell that builds the exports and "
               "start talking. Between notebooks a cell lets the last one's models go, so one kernel holds "
               f"the whole class.\n\n{route_table(route)}")
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(first.metadata))
    nb.metadata.pop("widgets", None)
    nb.cells = [nbformat.v4.new_markdown_cell(opening, id="class-opening"),
                _cell(bootstrap, MODEL_PARAMETER + bootstrap.source, "class-setup"),
                nbformat.v4.new_code_cell(BUILD_EXPORTS, id="class-exports")]
    for before, stop in zip((None, *route), route):
        if before is not None:
            nb.cells.append(nbformat.v4.new_code_cell(RELEASE.format(done=before.notebook, next=stop.notebook),
                                                      id=f"release-{before.notebook}"))
        cells = read(stop.notebook, folder)
        parts = pieces(cells)
        setup_cell = next(i for i, c in enumerate(cells) if c.cell_type == "code")
        for k in route_pieces(stop, cells):
            piece = parts[k]
            if piece.cell in (0, setup_cell):
                continue
            suffix = "" if piece.lines is None else f"-{piece.lines[0]}"
            nb.cells.append(_cell(cells[piece.cell], piece_source(piece, cells),
                                  f"nb{stop.notebook}-c{piece.cell}{suffix}"))
    return nb


def check_class_notebook(path: Path | None = None) -> None:
    """Raise RouteError where the stored class notebook is not what the route generates."""
    import nbformat

    path = path or CLASS_NOTEBOOK
    if not path.is_file():
        raise RouteError(f"{path} does not exist: {GENERATE_FIX}")
    stored = nbformat.read(path, as_version=4).cells
    fresh = class_notebook().cells
    for k, (a, b) in enumerate(zip(stored, fresh)):
        if (a.cell_type, a.source, a.get("outputs"), a.get("id")) != (b.cell_type, b.source, b.get("outputs"), b.get("id")):
            raise RouteError(f"{path.name} is out of sync with the nine notebooks at cell {k} "
                             f"({b.get('id')}): {GENERATE_FIX}")
    if len(stored) != len(fresh):
        raise RouteError(f"{path.name} has {len(stored)} cells where the route gives {len(fresh)}: {GENERATE_FIX}")


COURSE_LINE = re.compile(r"The nine notebooks take about \d+ minutes \(about \d+ hours\): the \d+-minute class below "
                         r"and \d+ at home")
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
        minutes.cache_clear()
        moved = False
        for number in NUMBERS:
            path = notebook_path(number, folder)
            nb = nbformat.read(path, as_version=4)
            edited = False
            for cell in nb.cells:
                if cell.cell_type != "markdown":
                    continue
                text = TIME_LINE.sub(lambda m: time_line(number), cell.source) if cell.source.startswith("# ") \
                    else cell.source
                text = _rewrite(text) if number == "01" else text
                if text != cell.source:
                    cell.source, edited = text, True
            if edited:
                nbformat.write(nb, path)
                changed.add(path)
                moved = True
        text = readme.read_text()
        if (new := _rewrite(text)) != text:
            readme.write_text(new)
            changed.add(readme)
            moved = True
        if not moved:
            return sorted(changed)
    raise RouteError("the route's minutes did not settle after five rewrites of the notebooks' time lines")


def write_class_notebook(path: Path | None = None) -> Path:
    import nbformat

    path = path or CLASS_NOTEBOOK
    nbformat.write(class_notebook(), path)
    return path
