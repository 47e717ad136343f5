"""chatlab's cache (CHATLAB_HOME, default ~/.cache/chatlab): folders built atomically (dead builds'
leftovers swept), checked before use: sizes always, sha256 when the mtime changed or when asked."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NotRequired, TypedDict

from chatlab._thirdparty import Jsonable
from chatlab.errors import AssetError
from chatlab.models.assets import Asset

TMP_PREFIX = ".tmp-"
OWNER = ".chatlab-build-owner.json"
STALE_AFTER_S = 60 * 60  # a build takes minutes; an hour leaves a wide margin
LIVE_MAX_S = 24 * 60 * 60
FIX_HOME = "set CHATLAB_HOME to a writable folder with space (e.g. CHATLAB_HOME=/tmp/chatlab)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return True


def is_stale(tmp: Path, now: float | None = None) -> bool:
    """Whether a temporary build folder was left by a build that can no longer finish."""
    now = time.time() if now is None else now
    try:
        age = now - tmp.stat().st_mtime
    except OSError:
        return False
    try:
        owner = json.loads((tmp / OWNER).read_text())
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return age > STALE_AFTER_S
    if host != socket.gethostname():
        return age > STALE_AFTER_S
    return not _pid_alive(pid) or age > LIVE_MAX_S


def sweep_stale(parent: Path) -> list[Path]:
    """Remove stale temporary build folders in `parent` (never raises); the ones removed."""
    removed: list[Path] = []
    try:
        candidates = [p for p in parent.iterdir() if p.name.startswith(TMP_PREFIX) and p.is_dir()]
    except OSError:
        return removed
    for tmp in candidates:
        if is_stale(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
            if not tmp.exists():
                removed.append(tmp)
    return removed


def stale_folders(root: Path) -> list[Path]:
    """Stale temporary build folders anywhere under `root` (for `chatlab doctor`)."""
    if not root.is_dir():
        return []
    return [p for p in root.rglob(f"{TMP_PREFIX}*") if p.is_dir() and is_stale(p)]


def disk_error(err: BaseException, where: Path) -> AssetError | None:
    text = str(err)  # safetensors raises SafetensorError("... os error 28 ... StorageFull ...")
    if (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
            or any(s in text for s in ("No space left on device", "os error 28", "StorageFull"))):
        # the partial build is removed; the space it took is free again
        return AssetError(f"the disk holding {where} ran out of space during the build; "
                          f"free some space or {FIX_HOME}")
    if isinstance(err, OSError) and err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return AssetError(f"cannot write the chatlab cache at {where} ({err.strerror}); {FIX_HOME}")
    return None


def check_free_space(where: Path, need: int, what: str) -> None:
    """Refuse to start a build that cannot fit, before spending a minute on it."""
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise AssetError(f"building {what} needs about {need / 1e6:,.0f} MB in {where}, but only "
                         f"{free / 1e6:,.0f} MB are free; free some space or {FIX_HOME}")


@contextmanager
def atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a temporary folder; rename it to `final` only if the block succeeds."""
    sweep_stale(final.parent)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{final.name}-", dir=final.parent))
        (tmp / OWNER).write_text(json.dumps(
            {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}))
    except OSError as err:
        raise (disk_error(err, final.parent) or err) from err
    try:
        yield tmp
        (tmp / OWNER).unlink()
        if final.exists():  # a stale, damaged or half-built entry
            shutil.rmtree(final)
        os.replace(tmp, final)
    except Exception as err:
        explained = disk_error(err, final.parent)
        if explained is None:
            raise
        raise explained from err
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def read_json(path: Path, **expect: Jsonable) -> dict[str, Jsonable] | None:
    """A JSON object file; None when missing, unreadable, not an object, or a key unlike in `expect`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and all(data.get(k) == v for k, v in expect.items()) else None


def chatlab_home() -> Path:
    return Path(os.environ.get("CHATLAB_HOME") or Path.home() / ".cache" / "chatlab")


def cache_dir(asset: Asset) -> Path:
    return chatlab_home() / "models" / asset.name


class FileRecord(TypedDict):
    size: int
    sha256: str
    mtime_ns: NotRequired[int]


FileRecords = dict[str, FileRecord]  # relative path -> its record


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


def file_sha256(path: Path) -> str:
    return sha256_of([path])[0]


def record_files(folder: Path, skip: frozenset[str] = frozenset()) -> FileRecords:
    records: FileRecords = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel in skip:
            continue
        stat = path.stat()
        records[rel] = {"size": stat.st_size, "sha256": file_sha256(path), "mtime_ns": stat.st_mtime_ns}
    return records


def check_files(folder: Path, records: FileRecords, *, full: bool = False) -> tuple[list[str], bool]:
    """(each damaged file with what is wrong, whether a recorded mtime in `records` changed)."""
    problems: list[str] = []
    refreshed = False
    for rel, rec in records.items():
        path = folder / rel
        try:
            stat = path.stat()
        except OSError:
            problems.append(f"{rel} is missing")
            continue
        if stat.st_size != rec["size"]:
            problems.append(f"{rel} has {stat.st_size:,} bytes, {rec['size']:,} when built "
                            f"({'truncated' if stat.st_size < rec['size'] else 'grown'})")
            continue
        if not full and stat.st_mtime_ns == rec.get("mtime_ns"):
            continue
        try:
            digest = file_sha256(path)
        except OSError as err:
            problems.append(f"{rel} cannot be read ({err.strerror or err})")
            continue
        if digest != rec["sha256"]:
            problems.append(f"{rel} was changed since the build (sha256 {digest[:12]}…, "
                            f"{rec['sha256'][:12]}… when built)")
        elif stat.st_mtime_ns != rec.get("mtime_ns"):
            rec["mtime_ns"] = stat.st_mtime_ns
            refreshed = True
    return problems, refreshed
