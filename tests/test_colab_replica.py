"""chatlab on a replica of today's Colab (tests/colab/: Colab's published package list).

The replica is a Python 3.13 venv with the packages of Colab's list that chatlab or a kernel
touches, at Colab's versions (tests/colab/replica.py builds it, once, into .venv313-colab/).
The first cell then runs in it exactly as on Colab: in an ipykernel of the replica with
`google.colab` in sys.modules, the clone replaced by a copy of this working tree. Then no
package of the replica may have changed version (beyond ALLOWED_CHANGES), chatlab imports,
notebooks 01-03 execute with the replica's ipykernel 6.17.1 (inside Binder's 2 GB cgroup where
one can be made), and the chat widget builds with its ipywidgets 7.7.1.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from test_notebooks import NOTEBOOKS, execute_within_binder_memory

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "colab"))
import replica  # noqa: E402

pytestmark = pytest.mark.slow
VENV = REPO / ".venv313-colab"
# Packages of the replica the install may change: exactly those the installer names, with its
# reasons (chatlab.lab.colab.REPLACED: nltk and setuptools, for llama-index-core). The stand-ins for
# what PyPI cannot give as Colab has it are in tests/colab/replica.py (STAND_INS).
from chatlab.lab.colab import REPLACED as ALLOWED_CHANGES  # noqa: E402
@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Build the replica, copy the working tree to the clone's place, run the first cell."""
    python = replica.python313()
    if python is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no Python 3.13 for the Colab replica (python3.13, or pyenv's 3.13.x)")
        pytest.skip("no Python 3.13 for the Colab replica (python3.13, or pyenv's 3.13.x)")
    py = replica.build(VENV, python)
    before = replica.reset(VENV)  # as built, whatever an earlier run added
    content = tmp_path_factory.mktemp("content")
    clone = content / "chatlab"
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(*replica.NOT_CLONED))
    return {"python": py, "before": before, "content": content, "clone": clone}


def first_cell_notebook() -> nbformat.NotebookNode:
    from chatlab.lab.session import BOOTSTRAP

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BOOTSTRAP)])


def run_first_cell(session: dict[str, object], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    from nbclient import NotebookClient

    from kernel_cgroup import make

    monkeypatch.setenv("CHATLAB_CLONE", str(session["clone"]))
    monkeypatch.setenv("CHATLAB_REPO", "https://invalid.example/unused")  # the clone is there
    nb = first_cell_notebook()
    cgroup = make("colab-install", limit=8_000_000_000)  # pip, not a notebook: no Binder limit
    spec_dir = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_PATH", str(spec_dir))
    if isinstance(cgroup, str):  # no cgroup: a plain kernel spec of the replica's Python
        (spec_dir / "kernels" / "colab").mkdir(parents=True)
        import json

        (spec_dir / "kernels" / "colab" / "kernel.json").write_text(json.dumps({
            "argv": [str(session["python"]), "-m", "ipykernel_launcher", "-f", "{connection_file}", replica.AS_ON_COLAB],
            "display_name": "replica", "language": "python"}))
        kernel = "colab"
    else:
        kernel = cgroup.kernel_spec(spec_dir, str(session["python"]), extra=(replica.AS_ON_COLAB,))
    try:
        NotebookClient(nb, kernel_name=kernel, timeout=1800, allow_errors=True,
                       resources={"metadata": {"path": str(session["content"])}}).execute()
    finally:
        if not isinstance(cgroup, str):
            cgroup.remove()
    # the printout, and the error line where the cell stopped (SetupError shows only its message)
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}\n" for o in nb.cells[0].outputs)


@pytest.fixture(scope="module")
def first_cell(session: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The first cell run twice, as a learner does: the install, then after the restart it asks
    for (a new kernel) the same cell again. Later tests see the replica as installed."""
    with pytest.MonkeyPatch.context() as mp:
        out = run_first_cell(session, mp, tmp_path_factory.mktemp("first"))
        after = replica.installed(session["python"])  # type: ignore[arg-type]
        again = run_first_cell(session, mp, tmp_path_factory.mktemp("again"))
    print(out, again, sep="\n")
    return {"out": out, "after": after, "again": again}


def test_the_first_cell_installs_into_the_replica_without_replacing_its_packages(
        session: dict[str, object], first_cell: dict[str, object]) -> None:
    out, after, again = first_cell["out"], first_cell["after"], first_cell["again"]
    assert isinstance(out, str) and isinstance(after, dict) and isinstance(again, str)
    assert "chatlab setup: kept this runtime's packages" in out
    before: dict[str, str] = session["before"]  # type: ignore[assignment]
    changed = {n: (v, after.get(n)) for n, v in before.items() if after.get(n) != v}
    assert set(changed) <= set(ALLOWED_CHANGES), f"the install changed Colab's packages: {changed}"
    for name in changed:  # the cell names each replaced package and why
        assert f"{name} {before[name]} -> {after[name]} ({ALLOWED_CHANGES[name]})" in out
    added = sorted(set(after) - set(before))
    print(f"added {len(added)}: {' '.join(added)}")
    assert "chatlab" in added and "openvino" in added
    assert "optimum-intel" not in added  # the export's own environment has it, not the kernel
    for name, version in [("ipykernel", "6.17.1"), ("ipywidgets", "7.7.1"), ("transformers", "5.15.0"),
                          ("numpy", "2.1.3"), ("huggingface-hub", "1.27.0")]:
        assert after[name] == version
    # A replaced package the kernel had imported (setuptools: every Python loads its
    # distutils hook at start) asks for one restart, naming it; the cell after the restart (a
    # new kernel) installs nothing and passes.
    if "setuptools" in changed:
        assert "SetupError: installed new versions of setuptools" in out and "restart the session" in out
    else:
        assert "(colab), Python 3.13" in out
    assert "kept this runtime's packages" not in again and "Error" not in again
    assert "(colab), Python 3.13" in again and "transformers 5.15.0" in again


def test_chatlab_imports_and_the_widget_builds_with_ipywidgets_7(session: dict[str, object],
                                                                 first_cell: dict[str, object]) -> None:
    code = ("import ipywidgets, chatlab, chatlab.lab.widgets as w; from chatlab.lab.widgets import ChatWidget; "
            "print(ipywidgets.__version__, chatlab.__file__); "
            "from chatlab.lab.evals.controls import ScriptedBackend; "
            "from chatlab.models import load_tokenizer; "
            "b = ScriptedBackend(load_tokenizer('smollm2-135m-instruct'), ['Hi there.']); "
            "c = ChatWidget(b, 'smollm2-135m-instruct'); print(repr(c.send('hello', echo=False))); "
            "print(type(c.view).__name__, len(c.view.children), c.transcript.value)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(session["clone"])}
    proc = subprocess.run([str(session["python"]), "-c", code], capture_output=True, text=True,
                          env=env, timeout=600, cwd=str(session["content"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("7.7.1 ") and str(session["clone"]) in lines[0]
    assert lines[1] == "'Hi there.'" and lines[2].startswith("VBox 5 ") and "Hi there." in lines[2]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2] in ("01", "02", "03")],
                         ids=lambda p: p.stem)
def test_notebooks_run_on_the_replica(path: Path, session: dict[str, object], first_cell: dict[str, object],
                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("CHATLAB_CLONE", str(session["clone"]))
    monkeypatch.setenv("CHATLAB_REPO", "https://invalid.example/unused")
    clone_nb = Path(str(session["clone"])) / "notebooks" / path.name
    nb = nbformat.read(clone_nb, as_version=4)
    execute_within_binder_memory(clone_nb, nb, str(session["python"]), monkeypatch, tmp_path,
                                 kernel_args=(replica.AS_ON_COLAB,), cwd=Path(str(session["content"])))
    first = "".join(o.get("text", "") for o in [c for c in nb.cells if c.cell_type == "code"][0].outputs)
    assert "(colab), Python 3.13" in first and "transformers 5.15.0" in first
