"""Binder's memory limit, enforced: a notebook's kernel (and all it starts) runs in a memory
cgroup limited to 2 GB, the mechanism Binder itself uses.

The kernel is launched through a small wrapper (`python kernel_cgroup.py PROCS_FILE PYTHON
ARGS...`) that writes its own pid into the cgroup's `cgroup.procs` and then execs the real
kernel; every process the kernel starts (servers, bench workers, exports) is born inside the
cgroup. The kernel spec that names the wrapper lives in a temporary JUPYTER_PATH folder, so
nbclient starts it like any kernel.

The cgroup is made under the test process's own memory cgroup (cgroup v1, as on these
machines: `/sys/fs/cgroup/memory` mounted read-write, running as root); where none can be made,
`make()` returns the reason and the caller falls back to the sampled PSS estimate.

What is read back: `memory.max_usage_in_bytes` (the peak the kernel charged the cgroup with:
anonymous memory plus the page cache of the files it read, as Binder counts it) and the OOM
kills (`oom_kill` in `memory.oom_control`).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

LIMIT_BYTES = 2_000_000_000  # Binder's 2 GB, decimal (the stricter reading)
V1_ROOT = Path("/sys/fs/cgroup/memory")


def own_cgroup() -> Path | None:
    """This process's cgroup v1 memory folder, or None where there is none."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                folder = V1_ROOT / path.lstrip("/")
                return folder if (folder / "memory.limit_in_bytes").is_file() else None
    except OSError:
        return None
    return None


class KernelCgroup:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    @property
    def max_usage(self) -> int:
        return int(self.read("memory.max_usage_in_bytes"))

    @property
    def working_set(self) -> int:
        """Usage minus the inactive file pages, as chatlab.models.memory reads it (Kubernetes'
        working set: page cache the kernel drops first left out). Sampled by the notebook test
        beside the max_usage peak."""
        from chatlab.models.memory import read_cgroup  # imported here: the wrapper runs without it

        return read_cgroup(self.path, 1)[1]

    @property
    def oom_kills(self) -> int:
        for line in self.read("memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return int(self.read("memory.failcnt")) and -1  # older kernels: hit the limit, count unknown

    def pids(self) -> list[int]:
        return [int(p) for p in self.read("cgroup.procs").split()]

    def kernel_spec(self, folder: Path, python: str, name: str = "chatlab-cgroup",
                    extra: tuple[str, ...] = ()) -> str:
        """Write a kernel spec that starts `python`'s ipykernel inside this cgroup (`extra`:
        more kernel arguments); its name."""
        spec = folder / "kernels" / name
        spec.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, str(Path(__file__).resolve()), str(self.path / "cgroup.procs"),
                python, "-m", "ipykernel_launcher", "-f", "{connection_file}", *extra]
        (spec / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": f"python in a {LIMIT_BYTES / 1e9:.0f} GB cgroup", "language": "python"}))
        return name

    def remove(self) -> None:
        """Kill what the kernel left behind in the cgroup (its own children), then remove it."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        try:
            self.path.rmdir()
        except OSError:
            pass


def make(tag: str, limit: int = LIMIT_BYTES) -> KernelCgroup | str:
    """A fresh memory cgroup limited to `limit` bytes, or the reason none can be made."""
    parent = own_cgroup()
    if parent is None:
        return "no cgroup v1 memory controller for this process (/sys/fs/cgroup/memory)"
    path = parent / f"chatlab-{tag}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit))
        if (path / "memory.memsw.limit_in_bytes").is_file():  # no swap to spill into either
            try:
                (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            except OSError:
                pass
    except OSError as err:
        try:
            path.rmdir()
        except OSError:
            pass
        return f"cannot make a memory cgroup under {parent} ({err.strerror or err}; root is needed)"
    return KernelCgroup(path)


if __name__ == "__main__":
    # The wrapper: join the cgroup, then become the kernel.
    procs, python, *args = sys.argv[1:]
    Path(procs).write_text(str(os.getpid()))
    os.execv(python, [python, *args])
