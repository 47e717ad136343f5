"""The project's data: `data/` beside the package of an editable install, else `$CHATLAB_DATA`."""
from __future__ import annotations

import os
from pathlib import Path

from chatlab.errors import ChatlabError


def data_dir() -> Path:
    """The data folder: `$CHATLAB_DATA`, else `data/` beside the imported package."""
    configured = os.environ.get("CHATLAB_DATA")
    if configured:
        folder = Path(configured).expanduser()
        if not folder.is_dir():
            raise ChatlabError(f"CHATLAB_DATA={configured!r} is not a folder; point it at the "
                               "repository's data/ folder, or unset it to use the one beside chatlab")
        return folder
    folder = Path(__file__).resolve().parent.parent / "data"
    if not folder.is_dir():
        raise ChatlabError(
            f"chatlab's data folder is not beside the package (looked for {folder}); chatlab was "
            "installed without its repository: clone the repository and `pip install -e .` in it "
            "(./run.sh setup does), or set CHATLAB_DATA to a copy of its data/ folder")
    return folder


def data_path(*parts: str) -> Path:
    """A file or folder inside the data folder, e.g. `data_path("docs")`; it must exist."""
    root = data_dir()
    path = root.joinpath(*parts)
    if not path.exists():
        have = ", ".join(sorted(p.name for p in root.iterdir() if not p.name.startswith("."))) or "nothing"
        raise ChatlabError(f"{'/'.join(parts)!r} is not in chatlab's data folder {root} (it holds: "
                           f"{have}); check the name, or update the checkout (git pull)")
    return path
