"""Run a command that dies with the process that started it.

`python -m chatlab.backends.child PARENT_PID COMMAND ARGS...` asks the kernel to SIGKILL it when
its parent dies (prctl PR_SET_PDEATHSIG), then execs COMMAND, which keeps that setting. Without
it, `kill -9` of `chatlab export` leaves optimum-cli running for half a minute, writing into a
folder nobody will rename and holding a gigabyte of memory. This trampoline is used instead of
`Popen(preexec_fn=...)`, which the Python docs call unsafe once threads exist (a notebook kernel,
a server), and it costs one extra interpreter start (~50 ms) per export.

The kernel's "parent" is the *thread* that forked; `run_cli` blocks in that thread until the
child exits, so the signal cannot fire early.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Ask for SIGKILL when the parent dies; False where prctl does not exist (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def command(argv: list[str]) -> list[str]:
    """`argv` wrapped so that it dies with this process."""
    return [sys.executable, "-m", "chatlab.backends.child", str(os.getpid()), *argv]


def main() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect: nobody waits for us
        os._exit(1)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
