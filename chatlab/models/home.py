"""Where chatlab keeps what it builds: one folder (CHATLAB_HOME, default ~/.cache/chatlab) with a
subfolder per model asset. Kept apart from the store so that the builders the store calls (the
stand-in tokenizers) can find their folder without importing the store back."""
from __future__ import annotations

import os
from pathlib import Path

from chatlab.models.assets import Asset


def chatlab_home() -> Path:
    return Path(os.environ.get("CHATLAB_HOME") or Path.home() / ".cache" / "chatlab")


def cache_dir(asset: Asset) -> Path:
    return chatlab_home() / "models" / asset.name
