"""The Python that runs optimum-cli for `chatlab export`: this one, or an isolated one.

optimum-intel caps its dependencies below what Colab ships, so installing it into the kernel's
Python would downgrade the kernel's transformers under it. The export runs in a child process
whose only output is the IR folder, so that child can run in a Python of its own: a venv that
sees this Python's site-packages behind its own (a .pth file names them, so torch, openvino and
the rest are reused; venv's --system-site-packages would see the base interpreter's, not a
venv's) and holds the lock's versions of the export stack.

Chosen in this order: CHATLAB_EXPORT_PYTHON when set; this Python when every requirement of the
export stack is met here; else the isolated venv under the chatlab cache, built once per Python
and lock under a lock file, and marked complete only at the end.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from chatlab.errors import ChatlabError
from chatlab.models import chatlab_home

# What the export child imports that the kernel does not need: installed in the venv at the
# lock's versions. Everything else is resolved against this Python's packages, which pip sees
# through the .pth file (pinning those to the lock too can pull a second torch).
EXPORT_STACK = ["optimum-intel", "optimum", "nncf", "transformers", "huggingface-hub"]
STAMP = ".chatlab-export-env"


def unmet(distribution: str = "optimum-intel") -> list[str]:
    """The requirements of `distribution` and of the export stack that this Python does not
    meet (a missing package is one too); [] when the export can run here."""
    from packaging.requirements import Requirement

    problems = []
    for name in [distribution] + [n for n in EXPORT_STACK if n != distribution]:
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra, or another platform
            try:
                have = md.version(req.name)
            except md.PackageNotFoundError:
                problems.append(f"{name} needs {req}, not installed")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                problems.append(f"{name} needs {req}, this Python has {have}")
    return problems


def requirements_dir() -> Path:
    folder = Path(__file__).resolve().parents[2] / "requirements"
    if not (folder / "lock.txt").is_file():
        raise ChatlabError(f"no requirements/lock.txt beside chatlab ({folder}): the isolated export "
                           "environment is built from the repository's lock; use an editable "
                           "checkout, or set CHATLAB_EXPORT_PYTHON to a Python that has optimum-intel")
    return folder


def lock_pins() -> dict[str, str]:
    tag = f"{sys.version_info[0]}{sys.version_info[1]}"
    folder = requirements_dir()
    lock = folder / f"lock-py{tag}.txt"
    text = (lock if lock.is_file() else folder / "lock.txt").read_text()
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", text, re.M)}


def env_dir(pins: dict[str, str]) -> Path:
    digest = hashlib.sha256(repr(sorted(pins.items())).encode()).hexdigest()[:12]
    return chatlab_home() / "export-env" / f"py{sys.version_info[0]}{sys.version_info[1]}-{digest}"


def build_commands(env: Path, pins: dict[str, str], constraints_file: Path) -> list[list[str]]:
    py = str(env / "bin" / "python")
    return [[sys.executable, "-m", "venv", str(env)],
            [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(constraints_file),
             *(f"{n}=={pins[n]}" for n in EXPORT_STACK)]]


def kernel_sites() -> list[str]:
    """This Python's site-packages folders (a venv's own, or the system's on Colab)."""
    import site

    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        folders.append(site.getusersitepackages())
    return [f for f in folders if os.path.isdir(f)]


def see_kernel_sites(env: Path) -> None:
    """After its own site-packages, the venv's Python searches this Python's (a .pth file)."""
    own = sorted(env.glob("lib/python*/site-packages"))
    if not own:
        raise ChatlabError(f"the export environment {env} has no site-packages folder")
    (own[0] / "_chatlab_kernel_site.pth").write_text("".join(f + "\n" for f in kernel_sites()))


def ensure_env(run: object = subprocess.run) -> Path:
    """The isolated export Python, built first when missing or incomplete."""
    pins = lock_pins()
    env = env_dir(pins)
    python = env / "bin" / "python"
    if (env / STAMP).is_file() and python.is_file():
        return python
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.parent / f".{env.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel even if we are killed
        if (env / STAMP).is_file() and python.is_file():
            return python  # another process built it while we waited
        shutil.rmtree(env, ignore_errors=True)  # an interrupted build: start over
        print(f"chatlab: building the export environment {env} (once: optimum-intel and the "
              "transformers it supports, beside this Python's own packages)", file=sys.stderr, flush=True)
        constraints_file = env.parent / f".{env.name}-constraints.txt"
        constraints_file.write_text("".join(f"{n}=={pins[n]}\n" for n in EXPORT_STACK))
        try:
            for i, step in enumerate(build_commands(env, pins, constraints_file)):
                if i == 1:  # the venv exists: let it see this Python's packages before pip runs
                    see_kernel_sites(env)
                proc = run(step, capture_output=True, text=True)  # type: ignore[operator]
                if proc.returncode:
                    tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-6:])
                    raise ChatlabError(f"could not build the export environment ({' '.join(step[:4])} ...):"
                                       f"\n{tail}\ncheck the network to the package index, then export "
                                       "again (the environment is rebuilt from scratch)")
        except BaseException:
            shutil.rmtree(env, ignore_errors=True)
            raise
        finally:
            constraints_file.unlink(missing_ok=True)
        (env / STAMP).write_text(" ".join(f"{n}=={pins[n]}" for n in EXPORT_STACK) + "\n")
    return python


def export_python() -> str:
    """The Python that runs optimum-cli (see the module docstring for the order)."""
    if chosen := os.environ.get("CHATLAB_EXPORT_PYTHON", "").strip():
        return chosen
    if not unmet():
        return sys.executable
    return str(ensure_env())
