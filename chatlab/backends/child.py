"""Child processes that die with chatlab (`python -m chatlab.backends.child PARENT_PID COMMAND
ARGS...` sets PR_SET_PDEATHSIG, then execs), and optimum-cli run that way with a progress bar."""
from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from chatlab.errors import ChatlabError

PR_SET_PDEATHSIG = 1
# the stages of an export: nncf's compression report marks the second, the model's XML the third
STAGES = ["converting the graph", "compressing weights", "converting the tokenizer"]
COMPRESSION_LOG = ("weight compression", "bitwidth")


def die_with_parent() -> bool:
    """Ask for SIGKILL when the parent dies; False where prctl does not exist (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def stage_of(stage: int, line: str, out: Path | None) -> int:
    """The stage reached, given the latest log line and the output folder (never goes back)."""
    if out is not None and (out / "openvino_model.xml").is_file():
        return max(stage, 2)
    if any(n in line.lower() for n in COMPRESSION_LOG):
        return max(stage, 1)
    return stage


def run_cli(args: list[str], desc: str, out: Path | None = None) -> None:
    """Run optimum-cli (dying with us) under a stage bar; on failure raise with its log's end."""
    from tqdm.auto import tqdm

    tail: deque[str] = deque(maxlen=15)
    lines: queue.Queue[str | None] = queue.Queue()
    stage = 0
    proc = subprocess.Popen([sys.executable, "-m", "chatlab.backends.child", str(os.getpid()), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)

    def pump() -> None:  # a thread, so that the main loop can refresh the clock meanwhile
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    fmt = "{desc}: stage {n}/{total}{postfix} [{elapsed}]"
    with tqdm(desc=desc, total=len(STAGES), initial=1, bar_format=fmt, file=sys.stderr) as bar:
        bar.set_postfix_str(STAGES[0])
        try:
            while True:
                try:
                    line = lines.get(timeout=0.5)
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                if line:
                    tail.append(line.rstrip())
                new = stage_of(stage, line, out)
                if new != stage:
                    stage, bar.n = new, new + 1
                    bar.set_postfix_str(STAGES[new])
                bar.refresh()  # the elapsed clock moves even while the child is silent
            code = proc.wait()
            if code == 0:
                bar.n = len(STAGES)
                bar.set_postfix_str("done")
        finally:
            if proc.poll() is None:  # interrupted: do not leave the child writing
                proc.kill()
                proc.wait()
    if code != 0:
        log = "\n".join(tail)
        raise ChatlabError(f"optimum-cli export failed (exit {code}); the last lines were:\n{log}\n"
                           "Check that the model folder is a complete Hugging Face model.")


def main() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect: nobody waits for us
        os._exit(1)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
