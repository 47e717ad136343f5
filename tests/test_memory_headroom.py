"""chatlab.models.memory reads a session's memory limit from its cgroup (Binder's 2 GB), not from
the host; the optional column in notebooks 07 and 08 is skipped, with the numbers, when the 0.5B
model would not fit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatlab.lab.evals import controls
from chatlab.models import memory

GB = 1_000_000_000


def fake_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, files: dict[str, str],
                available: int = 20 * GB) -> None:
    root = tmp_path / "sys"
    folder = root / "kubepods" / "pod1"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    proc = tmp_path / "cgroup"
    proc.write_text("0::/kubepods/pod1\n" if version == 2 else "5:memory:/kubepods/pod1\n1:cpu:/\n")
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    monkeypatch.setattr(memory, "V1_ROOT" if version == 1 else "V2_ROOT", root)
    import psutil

    class VM:
        pass
    vm = VM()
    vm.available = available  # type: ignore[attr-defined]
    monkeypatch.setattr(psutil, "virtual_memory", lambda: vm)


def test_v1_limit_minus_the_working_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cgroup(tmp_path, monkeypatch, 1, {
        "memory.limit_in_bytes": str(2 * GB), "memory.usage_in_bytes": str(1_500_000_000),
        "memory.stat": "cache 700000000\ntotal_inactive_file 600000000\ntotal_rss 800000000\n"})
    assert memory.cgroup_memory() == (2 * GB, 900_000_000)  # page cache the kernel would drop is not use
    free, where = memory.headroom()
    assert free == 1_100_000_000 and "2.0 GB limit, 0.9 GB in use" in where


def test_v2_limit_and_v2_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cgroup(tmp_path, monkeypatch, 2, {
        "memory.max": f"{2 * GB}\n", "memory.current": str(GB), "memory.stat": "anon 800000000\ninactive_file 100000000\n"})
    assert memory.headroom()[0] == 1_100_000_000
    (tmp_path / "sys" / "kubepods" / "pod1" / "memory.max").write_text("max\n")
    assert memory.cgroup_memory() is None
    assert memory.headroom() == (20 * GB, "the machine's available memory")


def test_a_cgroup_larger_than_the_free_host_memory_reads_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cgroup(tmp_path, monkeypatch, 1, {
        "memory.limit_in_bytes": str(64 * GB), "memory.usage_in_bytes": str(GB), "memory.stat": ""},
        available=3 * GB)
    assert memory.headroom() == (3 * GB, "the machine's available memory")


def test_unreadable_cgroup_files_fall_back_to_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cgroup(tmp_path, monkeypatch, 1, {"memory.limit_in_bytes": "garbage", "memory.stat": ""})
    assert memory.cgroup_memory() is None


def test_a_real_cgroup_limit_is_seen_from_inside() -> None:
    """A child placed in a real 500 MB memory cgroup (cgroup v1, as root) reads that limit."""
    sys.path.insert(0, str(Path(__file__).parent))
    from kernel_cgroup import KernelCgroup, make

    group = make("headroom", limit=500_000_000)
    if not isinstance(group, KernelCgroup):
        pytest.skip(group)  # the fake-file tests above cover the arithmetic
    try:
        code = ("from chatlab.models.memory import headroom; free, where = headroom(); "
                "print(free); print(where)")
        out = subprocess.run([sys.executable, str(Path(__file__).parent / "kernel_cgroup.py"),
                              str(group.path / "cgroup.procs"), sys.executable, "-c", code],
                             capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    finally:
        group.remove()
    assert 0 < int(out[0]) < 500_000_000 and "0.5 GB limit" in out[1], out


def test_the_optional_column_says_why_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatlab.backends.export as export
    import chatlab.models.store as store

    monkeypatch.setattr(store, "is_available", lambda asset: False)
    assert controls.optional_model() == (None, "not installed")
    monkeypatch.setattr(store, "is_available", lambda asset: True)
    monkeypatch.setattr(export, "is_exported", lambda folder: True)
    monkeypatch.setattr(memory, "headroom", lambda: (900_000_000, "this session's 2.0 GB limit, 1.1 GB in use"))
    name, why = controls.optional_model()
    assert name is None and why == ("skipped: needs 1.40 GB, 0.90 GB free "
                                    "(this session's 2.0 GB limit, 1.1 GB in use)")
    monkeypatch.setattr(export, "is_exported", lambda folder: False)  # building it needs more
    assert controls.optional_model()[1].startswith("skipped: needs 3.90 GB to build it, 0.90 GB free")
    monkeypatch.setattr(memory, "headroom", lambda: (12 * GB, "the machine's available memory"))
    assert controls.optional_model() == (controls.OPTIONAL_MODEL, "")


def test_freed_heap_is_given_back() -> None:
    """Blocks freed below a live one stay in glibc's heap (the cgroup counts them) until
    release_freed_memory trims them; run in a fresh interpreter so the heap is only this test's."""
    script = """
import ctypes.util, sys
from chatlab.models.memory import _anon_rss, release_freed_memory
if not ctypes.util.find_library("c") or "glibc" not in " ".join(__import__("platform").libc_ver()):
    print("no-glibc"); sys.exit()
blocks = [bytearray(64 << 10) for _ in range(4000)]   # 256 MB in 64 KB heap blocks, touched
pin = bytearray(64 << 10)                             # a live block above them: the heap cannot shrink
held = _anon_rss()
del blocks
kept = _anon_rss()
print(held, kept, release_freed_memory(), _anon_rss())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    if out == ["no-glibc"]:
        pytest.skip("malloc_trim is glibc's; this C library keeps no such heap to trim")
    held, kept, released, after = map(int, out)
    assert kept > held - 50_000_000, "free() already returned the blocks: the test's premise is gone"
    assert released > 200_000_000 and after < kept - 200_000_000, out


def resident_pages(path: Path) -> int:
    """How many of `path`'s pages are in the page cache (mincore over a fresh mapping, which
    faults nothing in)."""
    import ctypes
    import mmap
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                               ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    try:
        vec = ctypes.create_string_buffer(-(-size // mmap.PAGESIZE))
        assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        return sum(b & 1 for b in vec.raw)
    finally:
        libc.munmap(addr, size)


def test_read_weights_leave_the_page_cache_only_under_a_limit(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded model's file pages count against a memory cgroup; under a limit they are dropped
    (on a laptop they stay, for the next load). tmp_path must be on a disk, not tmpfs."""
    import os

    weights = tmp_path / "export" / "openvino_model.bin"
    weights.parent.mkdir()
    with open(weights, "wb") as fh:
        fh.write(os.urandom(8 << 20))
        fh.flush()
        os.fsync(fh.fileno())  # clean pages: only those can be dropped
    weights.read_bytes()
    cached = resident_pages(weights)
    if cached == 0:
        pytest.skip(f"{tmp_path} keeps no page cache for its files (tmpfs or similar)")
    monkeypatch.setattr(memory, "cgroup_memory", lambda: None)
    assert memory.drop_page_cache(tmp_path) == 0 and resident_pages(weights) == cached
    monkeypatch.setattr(memory, "cgroup_memory", lambda: (2 * GB, GB))
    assert memory.drop_page_cache(tmp_path) == 1
    assert resident_pages(weights) == 0
