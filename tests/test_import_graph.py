"""The package's house plan, read from its imports: no module imports itself back (directly or
round a circle), and the rooms (the subpackages and top-level modules of chatlab) stand on
floors, each importing only rooms on floors below it. Every import counts, including the lazy
ones inside functions: a lazy import hides a circle from Python, not from a reader."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "chatlab"

# Lowest first. Data flows render -> generate -> parse -> serve; the lab (chatlab/lab: the
# course's benches, evals, exercises and notebook set-up) stands on the core, and the entry points
# on top. "__init__" is the package itself (chatlab/__init__.py: errors and data_path, nothing
# heavy), which lab/session.py imports to find where chatlab was imported from. A lab module is
# its own room, "lab.<name>", so the lab keeps floors of its own.
FLOORS = [
    ["errors", "_thirdparty"],
    ["data", "types", "protocols"],
    ["models", "tools", "__init__"],
    ["render", "backends", "generate"],
    ["engine"],
    ["serve"],
    ["lab", "lab.diagrams", "lab.colab", "lab.route", "lab.explicit_kv"],
    ["lab.finetune", "lab.widgets", "lab.session", "lab.doctor", "lab.audit", "lab.certify", "lab.evals"],
    ["lab.bench"],       # `chatlab bench` times engines, speedups and eval tasks: above them all
    ["lab.exercises"],   # graded against the package's own code, evals and finetune included
    ["lab.rehearse"],    # runs the notebooks' route cells in fresh kernels, here or on the Colab replica
    ["cli"],
]
CORE = {"errors", "_thirdparty", "data", "types", "protocols", "models", "tools", "__init__",
        "render", "backends", "generate", "engine", "serve"}
FLOOR_OF = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def module_names() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each chatlab module -> the chatlab modules it imports (a name imported from a package
    counts as its submodule when there is one: `from chatlab.tools import formats`)."""
    modules = module_names()

    def owner(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = defaultdict(set)
    for name, (path, is_package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level-1 more
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target.split(".")[0] == "chatlab" and owner(target) != name:
                    graph[name].add(owner(target))
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "lab":
        return f"lab.{parts[2]}"
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    # a lazy import inside a function (`chatlab serve` imports the server's app in its handler)
    assert "chatlab.serve.app" in graph["chatlab.cli.serve"]
    # a package importing its own submodules
    assert "chatlab.render.resolve" in graph["chatlab.render"]


def test_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back() -> None:
    assert circles(import_graph()) == []


def test_every_room_has_a_floor() -> None:
    rooms = {room(m) for m in module_names()}
    assert rooms - set(FLOOR_OF) == set(), "a new room: give it a floor in FLOORS"


def test_rooms_import_only_rooms_below() -> None:
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        for target in targets
        if room(source) != room(target) and FLOOR_OF[room(target)] >= FLOOR_OF[room(source)]
    )
    assert upward == []


def test_the_core_never_imports_the_lab_or_the_cli() -> None:
    up = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        if room(source) in CORE
        for target in targets
        if room(target) not in CORE
    )
    assert up == []


def test_the_core_holds_no_module_only_the_lab_uses() -> None:
    """A core module that no other core module imports is there for a command of its own, so
    the CLI imports it and nothing else does; a module only the lab, the tests or the notebooks
    use (a bench table, a test double, a notebook picture) belongs in the lab."""
    importers: dict[str, set[str]] = defaultdict(set)
    for source, targets in import_graph().items():
        for target in targets:
            importers[target].add(source)
    stray = sorted(
        f"{module} <- {', '.join(sorted(importers[module])) or 'nothing'}"
        for module, (_, is_package) in module_names().items()
        if room(module) in CORE and not is_package
        and not any(room(m) in CORE for m in importers[module] - {module})
        and (not importers[module] or any(room(m) != "cli" for m in importers[module]))
    )
    assert stray == []


# Rooms whose modules import chatlab's own modules at their top, and the modules of those rooms
# whose function-level imports are still to move.
TOP_IMPORT_ROOMS = {"lab", "cli", "backends", "generate", "engine", "models", "render", "serve", "tools", "types"}
INNER_IMPORTS_LEFT: set[str] = set()


def inner_chatlab_imports(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each chatlab import inside a function of the file."""
    lines = path.read_text().splitlines()
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if (isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] == "chatlab"
                        or isinstance(inner, ast.Import) and any(a.name.split(".")[0] == "chatlab" for a in inner.names)):
                    found.add((inner.lineno, lines[inner.lineno - 1].strip()))
    return sorted(found)


def test_inner_chatlab_imports_are_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from chatlab.errors import ChatlabError\n\ndef f():\n    def g():\n"
                      "        import chatlab.data\n    from chatlab import errors  # why\n")
    assert inner_chatlab_imports(module) == [(5, "import chatlab.data"),
                                             (6, "from chatlab import errors  # why")]


def test_chatlab_imports_sit_at_the_top() -> None:
    """In these rooms a chatlab import inside a function is allowed only with a comment on its
    line saying why it cannot sit at the top (the module it imports pulls in a heavy package
    at its own top, or the importer must load where that module cannot)."""
    unexplained = sorted(
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for module, (path, _) in module_names().items()
        if room(module).split(".")[0] in TOP_IMPORT_ROOMS and module not in INNER_IMPORTS_LEFT
        for line, text in inner_chatlab_imports(path)
        if "#" not in text
    )
    assert unexplained == []


# Imported only by the commands that run them: `chatlab --help`, `chatlab templates` and
# `import chatlab` load none of these.
HEAVY = ["torch", "transformers", "openvino", "openvino_genai", "optimum", "xgrammar", "llama_cpp",
         "matplotlib", "ipywidgets", "nbformat", "nbclient", "httpx", "fastapi", "uvicorn"]


def test_the_cli_parser_and_the_package_import_nothing_heavy() -> None:
    code = ("import json, sys; import chatlab; bare = [m for m in {heavy} if m in sys.modules]; "
            "from chatlab.cli import build_parser; build_parser(); "
            "print(json.dumps([bare, [m for m in {heavy} if m in sys.modules]]))").format(heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    bare, cli = json.loads(out.stdout.strip().splitlines()[-1])
    assert bare == [] and cli == []


def test_the_cli_parser_builds_no_request_validator() -> None:
    """The request models load with the CLI's modules but build their validators on first use
    (pydantic's defer_build), so `chatlab --help` does not pay for them."""
    code = ("import json; from chatlab.cli import build_parser; build_parser(); "
            "from chatlab.engine.request import ChatRequest, CompletionRequest; "
            "print(json.dumps([ChatRequest.__pydantic_complete__, CompletionRequest.__pydantic_complete__]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False]
