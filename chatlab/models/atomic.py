"""Build a cache folder atomically, sweep what killed builds left, and explain disk errors.

A build writes into `.tmp-NAME-XXXX` next to its final place and is renamed into place only when
it succeeds. A killed build cannot clean up after itself, so each temporary folder carries an
owner file (pid, host, start time) and the next build or load next to it removes those whose
owner on this host no longer runs, those older than STALE_AFTER_S with no owner we can check
(another host), and any older than LIVE_MAX_S (pid reuse).

The disk errors a build meets (a read-only CHATLAB_HOME, a full disk) become AssetErrors that
say which folder and what to do.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from chatlab.errors import AssetError

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
    """Remove stale temporary build folders in `parent`; the ones removed. Never raises: a
    read-only or missing folder simply has nothing to sweep."""
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
    """An AssetError explaining `err` when it is a disk problem, else None."""
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
