"""A Colab replica: a Python 3.13 venv holding the packages of Colab's published list
(tests/colab/pip-freeze.txt) that chatlab or a kernel touches, at Colab's versions.

How it is built: pip resolves *roots* — every package of Colab's list that chatlab's own lock
names, plus the kernel and Jupyter stack — under constraints that pin every package of Colab's
list to Colab's version. pip therefore installs exactly the dependency closure of those roots,
each package at the version Colab ships (nothing to backtrack over), and packages that Colab's
list does not name are resolved freely (the nvidia libraries that PyPI's torch needs).

Colab's list holds a few packages that PyPI cannot give as Colab has them; the replica stands in
for each as named in `STAND_INS`, and the test's allow-list carries the same reasons.

Run as a script it builds the replica: `python tests/colab/replica.py VENV_DIR PYTHON`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FREEZE = HERE / "pip-freeze.txt"
STAMP = ".chatlab-colab-replica"
PRISTINE = "colab-replica-packages.json"  # the replica's packages as built, before any install

# What a Colab kernel runs on (the list), whether or not chatlab imports it.
KERNEL_STACK = ["ipykernel", "ipython", "jupyter-client", "jupyter-core", "traitlets", "tornado",
                "pyzmq", "ipywidgets", "widgetsnbextension", "notebook", "nbformat", "comm"]

# name -> (the constraint the replica uses instead of Colab's pin, or None for none; why)
STAND_INS = {
    "torch": ("torch==2.11.0",
              "Colab's torch==2.11.0+cpu comes from PyTorch's CPU index (download.pytorch.org), "
              "which is not reachable here; PyPI's 2.11.0 is the same release built with CUDA "
              "(it runs on CPU, beside the nvidia libraries it pins)"),
    "nvidia-nccl-cu13": (None, "not used by Colab's CPU torch; PyPI's torch 2.11.0 pins its own "
                               "(2.28.9, Colab lists 2.31.2 for another package)"),
    "google-colab": (None, "a tarball inside Colab's image (file:///colabtools); the test puts a "
                           "module named google.colab in sys.modules instead"),
}


# What a kernel of the replica is told before the first cell: it is on Colab. The module has a
# spec, as an imported one does: transformers asks importlib.util.find_spec("google.colab").
AS_ON_COLAB = ("--IPKernelApp.exec_lines=import sys, types, importlib.machinery as m; "
               "g = types.ModuleType('google.colab'); g.__spec__ = m.ModuleSpec('google.colab', None); "
               "sys.modules.setdefault('google.colab', g)")
# What a copy of the working tree leaves out, as Colab's clone of the repository has none of it.
NOT_CLONED = (".git", ".venv*", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info", ".ci",
              ".mypy_cache", ".chatlab-colab-installed")


def python313() -> str | None:
    """A Python 3.13 that runs: CHATLAB_COLAB_PYTHON, python3.13 on PATH, or pyenv's build."""
    if chosen := os.environ.get("CHATLAB_COLAB_PYTHON"):
        return chosen
    found = shutil.which("python3.13")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    builds = sorted(root.glob("versions/3.13.*/bin/python3.13"))
    return str(builds[-1]) if builds else None


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def colab_versions(text: str | None = None) -> dict[str, str]:
    """canonical name -> version of Colab's list. `name @ url` lines take the version from the
    wheel's file name (torch-2.11.0%2Bcpu-...whl -> 2.11.0+cpu); those without one are left out."""
    found: dict[str, str] = {}
    for line in (FREEZE.read_text() if text is None else text).splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if m := re.match(r"([A-Za-z0-9_.\-]+)==(\S+)$", line):
            found[canonical(m.group(1))] = m.group(2)
        elif m := re.match(r"([A-Za-z0-9_.\-]+) @ \S+/[^/]+?-(\d[^-/]*?)-(?:cp|py)\d", line):
            found[canonical(m.group(1))] = m.group(2).replace("%2B", "+")
    return found


def lock_names(lock: Path | None = None) -> set[str]:
    text = (lock or REPO / "requirements" / "lock.txt").read_text()
    return {canonical(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==", text, re.M)}


def constraints(colab: dict[str, str]) -> list[str]:
    """Every package of Colab's list at Colab's version (PyPI's build for the stand-ins)."""
    lines = []
    for name, version in sorted(colab.items()):
        if name not in STAND_INS:
            lines.append(f"{name}=={version}")
        elif STAND_INS[name][0]:
            lines.append(STAND_INS[name][0])
    return lines


def roots(colab: dict[str, str], lock: Path | None = None) -> list[str]:
    """The packages pip is asked for: Colab's packages that chatlab's lock or a kernel needs."""
    wanted = (lock_names(lock) | {canonical(n) for n in KERNEL_STACK}) & set(colab)
    return sorted(n for n in wanted if not (n in STAND_INS and STAND_INS[n][0] is None))


def fingerprint() -> str:
    """What the replica's content depends on: the constraints and the roots."""
    colab = colab_versions()
    return hashlib.sha256("\n".join(constraints(colab) + ["--"] + roots(colab)).encode()).hexdigest()


def build(venv: Path, python: str) -> Path:
    """Create (or reuse, when its stamp matches) the replica venv; returns its python."""
    py = venv / "bin" / "python"
    stamp = venv / STAMP
    if stamp.is_file() and stamp.read_text().strip() == fingerprint() and py.is_file():
        return py
    if not py.is_file():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    stamp.unlink(missing_ok=True)
    colab = colab_versions()
    cons = venv / "colab-constraints.txt"
    cons.write_text("\n".join(constraints(colab)) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check",
                    "--progress-bar", "off", "-c", str(cons), *roots(colab)], check=True)
    (venv / PRISTINE).write_text(json.dumps(installed(py), indent=1, sort_keys=True))
    stamp.write_text(fingerprint() + "\n")
    return py


def reset(venv: Path) -> dict[str, str]:
    """Back to the replica as built (an earlier test run installed chatlab's additions into it):
    what was added is uninstalled, what moved goes back to its built version (--no-deps: the
    same files as before). Returns the replica's packages as built."""
    py = venv / "bin" / "python"
    pristine = json.loads((venv / PRISTINE).read_text())
    for leftover in venv.glob("lib/python*/site-packages/~*"):  # an interrupted pip's temporaries
        shutil.rmtree(leftover, ignore_errors=True)
    now = installed(py)
    extra = sorted(set(now) - set(pristine))
    if extra:
        subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "-q", *extra], check=True)
    moved = [f"{n}=={v}" for n, v in sorted(pristine.items()) if now.get(n) != v]
    if moved:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", *moved], check=True)
    if (now := installed(py)) != pristine:
        raise RuntimeError(f"could not reset the replica {venv}: remove it to rebuild it")
    return pristine


def installed(python: Path) -> dict[str, str]:
    """canonical name -> version of every distribution in a venv (asked of its own Python)."""
    code = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version "
            "for d in m.distributions()}))")
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout
    return {canonical(k): v for k, v in json.loads(out).items()}


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else sys.executable))
