"""Will a second model fit? The memory a session may still use: under a cgroup (Binder), its
limit and working set, v1 or v2, as Kubernetes counts them; else the host's available memory."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
from pathlib import Path
from typing import Callable

from chatlab.models.cache import chatlab_home

V1_ROOT, V2_ROOT = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
NO_LIMIT = 1 << 60  # v1 writes "no limit" as a number near 2**63


def _own_cgroup() -> tuple[Path, int] | None:
    """(this process's memory cgroup folder, its version), or None where there is none."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and (V1_ROOT / path.lstrip("/") / "memory.limit_in_bytes").is_file():
            return V1_ROOT / path.lstrip("/"), 1
        if controllers == "" and (V2_ROOT / path.lstrip("/") / "memory.max").is_file():
            return V2_ROOT / path.lstrip("/"), 2
    return None


def _stat(folder: Path, key: str) -> int:
    for line in (folder / "memory.stat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def read_cgroup(folder: Path, version: int) -> tuple[int, int]:
    """(limit, working set) in bytes of the memory cgroup at `folder` (cgroup `version` 1 or 2);
    the limit is NO_LIMIT or more where none is set. OSError / ValueError when unreadable."""
    if version == 1:
        limit = int((folder / "memory.limit_in_bytes").read_text())
        usage = int((folder / "memory.usage_in_bytes").read_text())
        inactive = _stat(folder, "total_inactive_file")
    else:
        raw = (folder / "memory.max").read_text().strip()
        limit = NO_LIMIT if raw == "max" else int(raw)
        usage = int((folder / "memory.current").read_text())
        inactive = _stat(folder, "inactive_file")
    return limit, max(usage - inactive, 0)


def cgroup_memory() -> tuple[int, int] | None:
    """(limit, working set) in bytes of this process's memory cgroup when it has a limit."""
    found = _own_cgroup()
    if found is None:
        return None
    try:
        limit, used = read_cgroup(*found)
    except (OSError, ValueError):
        return None
    return None if limit >= NO_LIMIT else (limit, used)


def headroom() -> tuple[int, str]:
    """(bytes this session may still use, where that number comes from)."""
    import psutil

    available = psutil.virtual_memory().available
    found = cgroup_memory()
    # no cgroup limit, or a generous one on a busy host: the host is the bound
    if found is None or found[0] - found[1] >= available:
        return available, "the machine's available memory"
    limit, used = found
    return limit - used, f"this session's {limit / 1e9:.1f} GB limit, {used / 1e9:.1f} GB in use"


def _anon_rss() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def drop_page_cache(folder: Path | None = None) -> int:
    """Under a memory limit, drop the page cache of the files under `folder`; the files advised."""
    if cgroup_memory() is None or not hasattr(os, "posix_fadvise"):
        return 0
    advised = 0
    for path in (folder or chatlab_home()).rglob("*"):
        if not path.is_file():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # removed or unreadable meanwhile: nothing of it to drop
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            advised += 1
        finally:
            os.close(fd)
    return advised


def release_freed_memory() -> int:
    """Give freed heap and the page cache back to the system; the bytes of heap returned."""
    gc.collect()  # objects in reference cycles are freed first
    drop_page_cache()
    return trim_heap()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library is not glibc (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def trim_heap() -> int:
    """`malloc_trim(0)`; the bytes returned (0 where the C library is not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return 0
    before = _anon_rss()
    trim(0)
    return max(before - _anon_rss(), 0)
