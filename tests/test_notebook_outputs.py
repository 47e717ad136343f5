"""What a learner sees in a stored notebook is clean, and every notebook keeps the conventions.

Fast: these tests read the .ipynb files and execute nothing. The stored outputs are what GitHub,
Colab and a teacher's projector show before anyone runs a cell, so they must hold no machine
path, no ANSI escapes, no traceback, no progress-bar residue and no warning text (fix the cause:
`./run.sh store` re-executes the notebooks). Each check is its own test and names the notebook,
the cell index and the offending text, so a failure says where to look.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Iterator, NamedTuple

import nbformat
import pytest
from notebook_tidy import shown_widgets, widget_state

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

# An absolute path of this machine: a temp or home folder, a venv, an installed package, a cache.
# The look-behind keeps URLs out ("https://host/home/..." has a word character before "/home/").
MACHINE_PATH = re.compile(
    r"(?<![\w.:/-])(?:/work/|/root/|/home/|/Users/|/tmp/|/var/folders/|/private/var/)"
    r"|[A-Za-z]:\\Users\\"
    r"|\.venv\b|site-packages|dist-packages"
    r"|~?/\.cache/|\\\.cache\\|AppData\\Local")
# tqdm and transformers' loading bars: "45%|████ | 12/272 [00:01<00:20, 12.3it/s]".
PROGRESS = re.compile(r"\d+%\|"                       # the bar's opening: percentage and a pipe
                      r"|\|\s*\d+/\d+\s*\["              # "| 0/272 [" (count, then the timer)
                      r"|\d(?:\.\d+)?\s*(?:it/s|s/it)\]?"  # the rate
                      r"|Loading weights|Loading checkpoint shards|Fetching \d+ files")
# Python's warning lines ("UserWarning: ...", "warnings.warn(") and any "warning:" label.
WARNING = re.compile(r"\b[A-Z]\w*Warning\b|\bwarn\(|\bwarning:", re.I)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+", re.M)
GLOBAL_FILTER = re.compile(r"\b(?:warnings\.)?(?:filterwarnings|simplefilter|resetwarnings)\s*\("
                           r"|PYTHONWARNINGS|%env\s+PYTHONWARNINGS|-W\s*ignore")
TEXT_MIMES = ("text/plain", "text/html", "text/markdown", "text/latex", "application/json")


class Shown(NamedTuple):
    """One piece of stored output text: where it is, what kind, and the text."""
    cell: int
    kind: str  # "stdout", "stderr", "result: text/plain", "error", ...
    text: str


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def shown(nb: nbformat.NotebookNode) -> Iterator[Shown]:
    """Every text a reader sees in the stored outputs, cell by cell."""
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":
                yield Shown(index, out.get("name", "stream"), out.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                for mime in TEXT_MIMES:
                    value = out.get("data", {}).get(mime)
                    if value is not None:
                        yield Shown(index, f"result: {mime}", value if isinstance(value, str) else str(value))
            elif kind == "error":
                yield Shown(index, "error", f"{out.get('ename')}: {out.get('evalue')}\n" + "\n".join(out.get("traceback", [])))


def excerpt(text: str, start: int, end: int, margin: int = 40) -> str:
    """The offending text with a little context, on one line."""
    return repr(text[max(0, start - margin):end + margin])


def offences(path: Path, pattern: re.Pattern[str], kinds: tuple[str, ...] | None = None) -> list[str]:
    found = []
    for s in shown(load(path)):
        if kinds is not None and s.kind not in kinds:
            continue
        if (m := pattern.search(s.text)) is not None:
            found.append(f"{path.name} cell {s.cell} ({s.kind}): {m.group(0)!r} in {excerpt(s.text, m.start(), m.end())}")
    return found


def inside_catch_warnings(source: str, pos: int) -> bool:
    """Whether the text at `pos` is in the body of a `with warnings.catch_warnings():` block
    (a filter there is undone when the block ends: narrow, not global)."""
    lines = source[:pos].split("\n")
    line = lines[-1]
    indent = len(line) - len(line.lstrip())
    for above in reversed(lines[:-1]):
        if above.strip() and len(above) - len(above.lstrip()) < indent:
            if "catch_warnings(" in above:
                return True
            indent = len(above) - len(above.lstrip())
    return False


def fail_on(found: list[str], what: str, fix: str) -> None:
    assert not found, f"{what}; {fix}:\n  " + "\n  ".join(found)


# --- stored outputs -------------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_hold_no_machine_path(path: Path) -> None:
    fail_on(offences(path, MACHINE_PATH), "a stored output shows a path of the machine that ran it",
            "print names relative to the repository or the file name only, then ./run.sh store")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_hold_no_ansi_escape(path: Path) -> None:
    fail_on(offences(path, re.compile(r"\x1b\[?[0-9;]*[A-Za-z]?")), "a stored output holds ANSI escape codes",
            "turn colour off where it is printed (a library's log or report), then ./run.sh store")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_hold_no_error_or_traceback(path: Path) -> None:
    nb = load(path)
    found = [f"{path.name} cell {i}: error output {out.get('ename')}: {str(out.get('evalue'))[:120]!r}"
             for i, cell in enumerate(nb.cells) for out in cell.get("outputs", [])
             if out.get("output_type") == "error"]
    found += offences(path, TRACEBACK, ("stdout", "stderr", "result: text/plain", "result: text/html"))
    fail_on(found, "a stored output is an error or a traceback", "make the cell run cleanly, then ./run.sh store")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_hold_no_progress_bar_residue(path: Path) -> None:
    found = offences(path, PROGRESS)
    found += [f"{path.name} cell {s.cell} ({s.kind}): a carriage return in {excerpt(s.text, s.text.index(chr(13)), s.text.index(chr(13)) + 1)}"
              for s in shown(load(path)) if "\r" in s.text]
    fail_on(found, "a stored output holds progress-bar residue",
            "turn the bar off in the library call that draws it (as chatlab.models.load does), then ./run.sh store")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_widget_state_holds_only_shown_widgets(path: Path) -> None:
    """The file's widget metadata keeps only widgets a stored output shows (and the models they
    reference): a progress bar drawn in a cell whose outputs were cleared (a solution) would
    otherwise stay in the file, visible to any viewer that renders widget state."""
    nb = load(path)
    state = widget_state(nb)
    reached = shown_widgets(nb)
    stray = sorted(set(state) - reached)
    assert not stray, (f"{path.name}: widget state for {len(stray)} widget(s) no output shows, e.g. "
                       f"{json.dumps(state[stray[0]])[:200]}; ./run.sh store prunes it")
    assert not PROGRESS.search(json.dumps(nb.metadata)), f"{path.name}: progress-bar text in the metadata"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_hold_no_warning_text(path: Path) -> None:
    found = offences(path, WARNING)
    found += [f"{path.name} cell {s.cell} (stderr): {excerpt(s.text, m.start(), m.end())}"
              for s in shown(load(path)) if s.kind == "stderr" and (m := re.search(r"warn", s.text, re.I))
              and not WARNING.search(s.text)]
    fail_on(found, "a stored output shows a warning",
            "fix its cause, or silence that one call narrowly in the library, then ./run.sh store")


# --- the notebook's own cells ---------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_global_warnings_filter(path: Path) -> None:
    found = [f"{path.name} cell {i}: {m.group(0)!r} in {excerpt(cell.source, m.start(), m.end())}"
             for i, cell in enumerate(load(path).cells) if cell.cell_type == "code"
             for m in GLOBAL_FILTER.finditer(cell.source) if not inside_catch_warnings(cell.source, m.start())]
    fail_on(found, "a cell sets a global warnings filter (a habit not to teach: it hides the next real warning too)",
            "fix the warning's cause, or silence that one call narrowly in the library")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_title_comes_before_any_code_but_the_bootstrap(path: Path) -> None:
    cells = load(path).cells
    number = path.name[:2]
    titles = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and re.match(r"# \S", c.source)]
    assert titles, f"{path.name}: no title cell (a markdown cell starting '# {number} · ...')"
    title = titles[0]
    assert cells[title].source.startswith(f"# {number} "), \
        f"{path.name} cell {title}: the title should start '# {number} ·', not {cells[title].source.splitlines()[0]!r}"
    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    early = [i for i in code[1:] if i < title]  # code[0] is the bootstrap
    assert not early, (f"{path.name}: code cell(s) {early} come before the title (cell {title}): "
                       f"{cells[early[0]].source.splitlines()[0]!r}; move the title up, right after the bootstrap")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_follow_the_convention(path: Path) -> None:
    """2-5 '### Exercise N · title' cells, each followed by an attempt cell tagged `attempt` (a
    stub that raises NotImplementedError), a check cell tagged `check` (`check("nbNN.name", ...)`)
    and a solution tagged `solution`, hidden in JupyterLab (`jupyter.source_hidden`) and on Colab
    (a form cell, `cellView: "form"`, whose `#@title` line is all Colab shows), that runs the same
    check, prints nothing of its answer (only definitions, imports and check calls) and stores no
    outputs."""
    cells = load(path).cells
    exercises = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.lstrip().startswith("### Exercise")]
    assert 2 <= len(exercises) <= 5, (f"{path.name}: {len(exercises)} exercise cells at {exercises}; "
                                      "a notebook has 2-5 markdown cells starting '### Exercise N'")
    problems = []
    for n, i in enumerate(exercises, start=1):
        head = cells[i].source.lstrip().splitlines()[0]
        if not re.match(rf"### Exercise {n} · \S", head):
            problems.append(f"cell {i}: {head!r} should be '### Exercise {n} · <title>' (numbered 1, 2, 3 in order)")
        if i + 3 >= len(cells) or any(c.cell_type != "code" for c in cells[i + 1:i + 4]):
            problems.append(f"cell {i}: exercise {n} is not followed by attempt, check and solution code cells")
            continue
        attempt, checker, sol = cells[i + 1:i + 4]
        if "raise NotImplementedError" not in attempt.source or attempt.metadata.get("tags") != ["attempt"]:
            problems.append(f"cell {i + 1}: the attempt cell should be a stub that raises NotImplementedError, tagged 'attempt'")
        if checker.metadata.get("tags") != ["check"]:
            problems.append(f"cell {i + 2}: the check cell is not tagged 'check'")
        names = re.findall(r'\bcheck\("(nb\d\d\.\w+)"', checker.source)
        if not names or not names[0].startswith(f"nb{path.name[:2]}."):
            problems.append(f"cell {i + 2}: the check cell should call check(\"nb{path.name[:2]}.<name>\", ...)")
        meta = sol.metadata
        if "solution" not in meta.get("tags", []):
            problems.append(f"cell {i + 3}: the solution is not tagged 'solution' (metadata tags {meta.get('tags')})")
        if meta.get("jupyter", {}).get("source_hidden") is not True:
            problems.append(f"cell {i + 3}: the solution is not hidden (metadata jupyter.source_hidden is not true)")
        if not sol.source.startswith(f"#@title Solution to exercise {n}\n") or meta.get("cellView") != "form":
            problems.append(f"cell {i + 3}: the solution should be a Colab form cell (metadata cellView 'form') "
                            f"starting '#@title Solution to exercise {n}', not {sol.source.splitlines()[0] if sol.source else ''!r}")
        shown = [node for node in ast.parse(sol.source).body
                 if not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef))
                 and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                          and getattr(node.value.func, "id", "") == "check")]
        if shown or re.search(r"\bprint\(", sol.source):
            problems.append(f"cell {i + 3}: the solution should hold only imports, definitions and check calls "
                            f"(line {shown[0].lineno if shown else '?'} could show the answer)")
        if names and f'check("{names[0]}"' not in sol.source:
            problems.append(f"cell {i + 3}: the solution does not run the check {names[0]!r}")
        if sol.get("outputs"):
            problems.append(f"cell {i + 3}: the solution has stored outputs; they would show the answer (clear them)")
    assert not problems, f"{path.name}: exercises break the convention:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_diagram_is_drawn_from_its_mermaid_source(path: Path) -> None:
    """Each notebook draws its diagram with chatlab.lab.diagrams.show (an SVG output, which GitHub's
    viewer and Colab display, unlike a ```mermaid block) from data/diagrams/<notebook>.mmd."""
    from chatlab.lab.diagrams import parse, source

    cells = load(path).cells
    calls = [i for i, c in enumerate(cells) if c.cell_type == "code" and f'show("{path.stem}")' in c.source]
    assert len(calls) == 1, f"{path.name}: {len(calls)} cells call show({path.stem!r}); one draws the diagram"
    assert not [i for i, c in enumerate(cells) if "```mermaid" in c.source], \
        f"{path.name}: a ```mermaid block is left in a cell; its source lives in data/diagrams/{path.stem}.mmd"
    chart = parse(source(path.stem), path.stem)   # the source is in the subset the drawer reads
    assert chart.edges, f"data/diagrams/{path.stem}.mmd draws no edge"


# --- the checks themselves, on made-up outputs ----------------------------------------------

@pytest.mark.parametrize("text", [
    "saved to /work/main/.cache/x", "/root/.cache/chatlab/model", "cd /home/ann", "/tmp/tmpab12/Modelfile",
    "lib/python3.11/site-packages/transformers", "/srv/app/.venv/bin/python", "~/.cache/huggingface"])
def test_machine_paths_are_recognised(text: str) -> None:
    assert MACHINE_PATH.search(text)


@pytest.mark.parametrize("text", [
    "https://mybinder.org/v2/gh/x/HEAD?labpath=notebooks%2F01.ipynb", "data/finetune/Modelfile",
    "http://127.0.0.1:49347/v1", "captain_byte.llamafactory.json", "https://example.com/home/page"])
def test_ordinary_text_is_not_a_machine_path(text: str) -> None:
    assert not MACHINE_PATH.search(text)


@pytest.mark.parametrize("text", [
    "Loading weights:   0%|          | 0/272 [00:00<?, ?it/s]", "100%|##########| 5/5 [00:01<00:00,  3.2it/s]",
    "Batches: 12.5s/it]"])
def test_progress_bars_are_recognised(text: str) -> None:
    assert PROGRESS.search(text)


@pytest.mark.parametrize("text", ["12/12 answers token-for-token", "same as fine-tune    0/12", "100% end with 'Arr!'",
                                  "3.2 tok/s"])
def test_tables_are_not_progress_bars(text: str) -> None:
    assert not PROGRESS.search(text)


def test_a_filter_inside_catch_warnings_is_not_global() -> None:
    narrow = "import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n    f()\n"
    wide = "import warnings\nwarnings.filterwarnings('ignore')\nwith warnings.catch_warnings():\n    f()\n"
    assert inside_catch_warnings(narrow, narrow.index("warnings.simplefilter"))
    assert not inside_catch_warnings(wide, wide.index("warnings.filterwarnings"))


@pytest.mark.parametrize("text", ["x.py:3: UserWarning: careful", "  warnings.warn(msg)", "chatlab setup: warning: old"])
def test_warnings_are_recognised(text: str) -> None:
    assert WARNING.search(text)


# --- ./run.sh store -------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_run_sh_store_executes_a_notebook_in_place_offline(tmp_path: Path) -> None:
    """`./run.sh store NB` runs NB in place with the hub offline and this checkout's chatlab, and
    says how long it took; a notebook that fails is left unchanged and the status is 1."""
    import subprocess

    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv in this checkout: ./run.sh setup creates it (the store command runs its jupyter)")
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'import os, chatlab\nprint(os.environ["HF_HUB_OFFLINE"], os.environ["TOKENIZERS_PARALLELISM"], chatlab.__file__)')]), good)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), bad)
    proc = subprocess.run(["./run.sh", "store", str(good), str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert re.search(rf"{re.escape(str(good))} stored in \d+ s", proc.stdout), proc.stdout
    assert f"{bad} failed" in proc.stderr
    printed = load(good).cells[0].outputs[0].text.split()
    assert printed[:2] == ["1", "false"] and Path(printed[2]).resolve().is_relative_to(ROOT)
    assert not load(bad).cells[0].outputs  # left as it was


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_lessons_print_no_speed_target_lines(path: Path) -> None:
    """The bench's "target ... NOT met" lines are the project's bookkeeping: a notebook prints
    its tables with targets=False, and no stored output holds such a line."""
    cells = load(path).cells
    found = [f"cell {i}: {line.strip()[:80]!r}" for i, c in enumerate(cells) if c.cell_type == "code"
             for line in c.source.splitlines()
             if re.search(r"\b(format_table|engines_table|format_report)\(", line) and "targets=False" not in line
             and not line.lstrip().startswith(("from ", "import "))]
    found += [f"cell {s.cell}: {line[:80]!r}" for s in shown(load(path))
              for line in s.text.splitlines() if re.match(r"target \S+ .* (NOT met|met)$", line)]
    fail_on(found, "a bench table prints its speed-target lines in a lesson",
            "print it with format_table(result, targets=False) / engines_table(result, targets=False) / "
            "format_report(result, targets=False)")


def test_tidy_clears_solutions_merges_streams_and_prunes_widgets(tmp_path: Path) -> None:
    """What `./run.sh store` does after executing: on a made-up notebook, a solution's output goes,
    two stdout pieces become one, and only the shown widget (and the layout it references) stays."""
    from notebook_tidy import tidy

    v4 = nbformat.v4
    out = lambda text: v4.new_output("stream", name="stdout", text=text)  # noqa: E731
    shown = v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "aa1"}})
    nb = v4.new_notebook(cells=[v4.new_code_cell("print(1); print(2)", outputs=[out("1\n"), out("2\n")]),
                                v4.new_code_cell("chat", outputs=[shown]),
                                v4.new_code_cell("answer", outputs=[out("42\n")], metadata={"tags": ["solution"]})])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {
        "aa1": {"state": {"layout": "IPY_MODEL_bb2"}}, "bb2": {"state": {}},
        "cc3": {"state": {"value": " 272/272 [00:00<00:00, 1961.01it/s]"}}}}}
    path = tmp_path / "made_up.ipynb"
    nbformat.write(nb, path)
    tidy(str(path))
    nb = nbformat.read(path, as_version=4)
    assert [o.text for o in nb.cells[0].outputs] == ["1\n2\n"]
    assert nb.cells[2].outputs == [] and nb.cells[2].execution_count is None
    assert set(widget_state(nb)) == {"aa1", "bb2"} == shown_widgets(nb)
