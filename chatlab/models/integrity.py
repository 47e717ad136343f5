"""What a built cache folder holds, recorded at build time and checked before it is served.

A manifest alone says only that a build once finished; it cannot tell that the weights were
truncated, deleted or overwritten since. So every build records each file's size, sha256 and
modification time, and every load checks:

- sizes (and presence) always: one `stat` per file;
- the full sha256 only when a file's modification time differs from the record (it was written
  to, or the folder was copied without keeping times) or when asked (`chatlab models --verify`);
  after a hash that matches, the new time is recorded so the cost is paid once.
"""
from __future__ import annotations

import hashlib
from typing import NotRequired, TypedDict
from pathlib import Path


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
    """Size, sha256 and modification time of every file under `folder` except `skip`."""
    records: FileRecords = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel in skip:
            continue
        stat = path.stat()
        records[rel] = {"size": stat.st_size, "sha256": file_sha256(path),
                        "mtime_ns": stat.st_mtime_ns}
    return records


def check_files(folder: Path, records: FileRecords, *, full: bool = False) -> tuple[list[str], bool]:
    """(problems, refreshed): each damaged file with what is wrong, and whether a matching hash
    refreshed a recorded modification time in `records` (the caller may save it)."""
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
