"""One benchmark engine in its own process, so that its memory is measured on its own. JSON lines on
stdout: {"ready": true, ...} once loaded; a timing per {"ids": [...], "tokens": n}; on {"quit": true}
its peak resident memory."""
from __future__ import annotations

import json
import os
import resource
import sys
import time

from chatlab.lab.bench.engines import make_engine


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, not `ru_maxrss`, which Linux carries over `exec`
    from the parent (a worker of a big notebook kernel would report the kernel's peak)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    engine_name, model, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    speculate = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the protocol
    t0 = time.perf_counter()
    engine = make_engine(engine_name, model, precision, speculate)
    engine.load()
    out.write(json.dumps({"ready": True, "load_s": time.perf_counter() - t0, **engine.facts()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            out.write(json.dumps({"rss_mb": peak_rss_mb()}) + "\n")
            return
        timing = engine.run(request["ids"], request["tokens"], bool(request.get("stop_at_eos")))
        answer = {"ttft_s": timing.ttft_s, "decode_tok_s": timing.decode_tok_s, "tokens": timing.tokens}
        if timing.spec is not None:
            answer["spec"] = timing.spec
        out.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
