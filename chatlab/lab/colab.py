"""Installing chatlab into Colab's own Python without replacing what Colab ships: chatlab's needs
are resolved under a constraints file pinning every installed distribution."""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
from contextlib import suppress
from pathlib import Path

from chatlab.errors import ChatlabError

STAMP = ".chatlab-colab-installed"
# Packages whose lock pin does not fit Colab's versions: pip picks one that fits (name -> why).
LOCK_PIN_DROPPED: dict[str, str] = {
    "langchain-openai": "the lock's 1.7.4 does not fit Colab's langchain-core 1.5.5 and langchain "
                        "1.3.15; pip takes 1.5.1",
    "setuptools": "replaced (see REPLACED), below the lock's pin",
}
# Installed packages chatlab cannot work with at Colab's version: replaced, and the cell says so
# (name -> why). Each gets the lock's pin, unless LOCK_PIN_DROPPED names it.
REPLACED: dict[str, str] = {
    "nltk": "llama-index-core 0.14.25 needs nltk>=3.9.3; Colab has 3.9.1",
    "setuptools": "llama-index-core 0.14.25 needs setuptools>=80.9 (Colab has 75.2.0) and Colab's "
                  "torch 2.11 needs <82, below the lock's 84.2.1",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_file(repo: Path, tag: str) -> Path:
    """The lock for this Python ("312" -> requirements/lock-py312.txt), else the 3.11 one."""
    own = repo / "requirements" / f"lock-py{tag}.txt"
    return own if own.is_file() else repo / "requirements" / "lock.txt"


def pins(text: str) -> dict[str, str]:
    """canonical name -> version of every `name==version` line of a requirements file."""
    return {canonical(m.group(1)): m.group(2)
            for m in re.finditer(r"^[ \t]*([A-Za-z0-9_.\-]+)==([^\s;#]+)", text, re.M)}


def needs(repo: Path) -> list[str]:
    """The names in requirements/colab.txt: what a Colab kernel needs for every notebook."""
    text = (repo / "requirements" / "colab.txt").read_text()
    return [canonical(line.split("#")[0].strip()) for line in text.splitlines()
            if line.split("#")[0].strip()]


def installed_versions(names: list[str] | None = None) -> dict[str, str | None]:
    """canonical name -> version of every distribution this Python has (chatlab excluded: it
    is what gets installed); with `names`, just those, as given, None for a missing one."""
    if names is None:
        return {canonical(d.metadata["Name"]): d.version for d in md.distributions()
                if d.metadata["Name"] and canonical(d.metadata["Name"]) != "chatlab"}
    found: dict[str, str | None] = dict.fromkeys(names)
    for name in names:
        with suppress(md.PackageNotFoundError):
            found[name] = md.version(name)
    return found


def constraints(installed: dict[str, str | None], lock: dict[str, str]) -> list[str]:
    """Installed packages at their installed version (pip never changes them); missing ones and the
    REPLACED ones at the lock's pin, unless LOCK_PIN_DROPPED names them."""
    lines = [f"{name}=={version}" for name, version in sorted(installed.items()) if name not in REPLACED]
    return lines + [f"{name}=={version}" for name, version in sorted(lock.items())
                    if (name not in installed or name in REPLACED) and name not in LOCK_PIN_DROPPED]


def install_plan(repo: Path, python: str, constraints_file: Path) -> list[list[str]]:
    """The pip commands, in order."""
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    return [pip + ["-c", str(constraints_file), *needs(repo)],
            pip + ["--no-deps", "-r", str(repo / "requirements" / "nodeps.txt")],
            pip + ["--no-deps", "--no-build-isolation", "-e", str(repo)]]


def changed(before: dict[str, str | None], after: dict[str, str | None]) -> list[str]:
    """`name old -> new` for each package whose installed version changed (or that went)."""
    return [f"{n} {before[n]} -> {after.get(n, 'removed')}" for n in sorted(before)
            if after.get(n) != before[n]]


def loaded_distributions(modules: list[str] | None = None) -> set[str]:
    """The distributions (canonical names) whose top-level modules this process has imported."""
    owners = md.packages_distributions()
    tops = {m.split(".")[0] for m in (sys.modules if modules is None else modules)}
    return {canonical(d) for m in tops for d in owners.get(m, [])}


def fingerprint(repo: Path, tag: str) -> str:
    """What an install depends on: the Python and the requirement files."""
    digest = hashlib.sha256(tag.encode())
    for f in (lock_file(repo, tag), repo / "requirements" / "colab.txt",
              repo / "requirements" / "nodeps.txt", repo / "pyproject.toml"):
        digest.update(f.read_bytes())
    return digest.hexdigest()


def failed_step(step: list[str], err: subprocess.CalledProcessError) -> ChatlabError:
    """One message for a pip step that failed: its last lines, what to check, and that a rerun
    repairs it (nothing was marked installed)."""
    tail = "\n".join((err.stderr or err.stdout or "").strip().splitlines()[-8:])
    offline = re.search(r"(Could not find a version|No matching distribution|NewConnectionError|"
                        r"Temporary failure in name resolution|Network is unreachable)", tail)
    why = ("pip could not reach the package index: check that this session has internet "
           "(Colab: the runtime is connected), then" if offline else
           "pip could not install chatlab's needs alongside this runtime's packages (the lines "
           "above name the conflict); then")
    return ChatlabError(f"the install stopped in `{' '.join(step[3:7])} ...`:\n{tail}\n{why} run this cell "
                        "again: it starts the install over (nothing was marked done)")


def install(repo: Path, run: object = subprocess.run) -> tuple[list[str], list[str]]:
    """Install what this Python lacks, unless done already for these requirement files.
    Returns (what was done, packages replaced while loaded: a restart is needed when not empty)."""
    tag = f"{sys.version_info[0]}{sys.version_info[1]}"
    stamp, want = repo / STAMP, fingerprint(repo, tag)
    if stamp.is_file() and stamp.read_text().strip() == want:
        return [], []
    stamp.unlink(missing_ok=True)  # written again only after every step succeeded
    before = installed_versions()
    lock = pins(lock_file(repo, tag).read_text())
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as cons:
        cons.write("\n".join(constraints(before, lock)) + "\n")
    try:
        for step in install_plan(repo, sys.executable, Path(cons.name)):
            try:
                run(step, check=True, capture_output=True, text=True)  # type: ignore[operator]
            except subprocess.CalledProcessError as err:
                raise failed_step(step, err) from None
    finally:
        Path(cons.name).unlink(missing_ok=True)
    importlib.invalidate_caches()
    after = installed_versions()
    added = sorted(set(after) - set(before))
    replaced = changed(before, after)
    stamp.write_text(want + "\n")
    done = [f"kept this runtime's packages ({len(before)}; numpy {before.get('numpy', '-')}, torch "
            f"{before.get('torch', '-')}, transformers {before.get('transformers', '-')}, ipykernel "
            f"{before.get('ipykernel', '-')}), added {len(added)} that chatlab needs"
            + (f" ({', '.join(added[:12])}{', ...' if len(added) > 12 else ''})" if added else "")
            + f", the asset packages and chatlab (editable, from {repo})"]
    if replaced:
        why = {n: REPLACED.get(n.split()[0], "pip's resolution of chatlab's needs") for n in replaced}
        done.append("replaced: " + "; ".join(f"{n} ({w})" for n, w in why.items()))
    loaded = loaded_distributions()
    return done, sorted(n.split()[0] for n in replaced if n.split()[0] in loaded)
