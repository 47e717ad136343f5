"""Stored benchmark results: a full run kept in `data/bench/`, labelled with where it came from.

A notebook cannot run the full benchmark, and a number without its machine is no result, so a
run is stored once (`chatlab bench store`): the JSON `chatlab bench --json` prints, plus a `run`
record of the date, the command, the machine and its CPU; notebooks print that label above it.

    chatlab bench --json --plot '' | chatlab bench store full-run.json \
        --command "chatlab bench --json" --machine "a quiet 2-core VM"

A serving run's N-clients ratio is read against the engine's own batching gain measured beside
it: the server should keep CEILING_TARGET of it.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

from chatlab._thirdparty import Jsonable
from chatlab.backends.precision import cpu_info
from chatlab.data import data_dir, data_path
from chatlab.errors import ChatlabError
from chatlab.lab.bench.report import format_table

FOLDER = "bench"  # inside chatlab's data folder
RUN_KEYS = ("date", "command", "machine", "cpu")
CEILING_TARGET = 0.90  # share of the engine's own batching gain the server should keep


def label(result: dict[str, Jsonable], command: str, machine: str,
          date: str | None = None) -> dict[str, Jsonable]:
    """`result` with its `run` record (this machine's CPU, today's date unless given)."""
    if not command.strip() or not machine.strip():
        raise ChatlabError("a stored result needs the command that made it and a line about the "
                           "machine (e.g. 'a quiet 2-core VM'): pass --command and --machine")
    cpu = result.get("cpu") or cpu_info()
    run = {"date": date or dt.date.today().isoformat(), "command": command.strip(),
           "machine": machine.strip(), "cpu": cpu}
    return {**result, "run": run}


def write_json(result: dict[str, Jsonable], path: str | Path) -> Path:
    """Written whole or not at all: a temporary file in the same folder, then renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)
    return path


def load_stored(name: str) -> dict[str, Jsonable]:
    """A labelled result from `data/bench/NAME`; an unlabelled or unreadable one is an error."""
    path = data_path(FOLDER, name)
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ChatlabError(f"data/{FOLDER}/{name} is not valid JSON ({err}); store it again with "
                           "chatlab bench store") from None
    missing = [k for k in RUN_KEYS if k not in (result.get("run") or {})]
    if missing:
        raise ChatlabError(f"data/{FOLDER}/{name} has no {', '.join(missing)} in its run record: a "
                           "number without its machine is not a result; store it with "
                           "chatlab bench store --command ... --machine ...")
    return result


def run_label(result: dict[str, Jsonable]) -> str:
    """Where a stored result comes from, in two lines."""
    run = result["run"]
    cpu = run["cpu"]
    flags = " ".join(cpu.get("flags") or []) or "no avx512/bf16/AMX flags"
    return (f"stored result of `{run['command']}` on {run['date']}\n"
            f"machine: {run['machine']}; CPU {cpu.get('model')} ({flags}), "
            f"{cpu.get('threads')} threads")


def engines_table(result: dict[str, Jsonable], targets: bool = True) -> str:
    """A stored `chatlab bench` result: its label, then the bench's own table (`targets=False`:
    without the speed-target lines, as the notebooks show it)."""
    return run_label(result) + "\n" + format_table(result, targets=targets)


def kept(result: dict[str, Jsonable]) -> float | None:
    """The server's N-vs-1 ratio over the engine's (None when the run has no engine ratio)."""
    engine = result.get("engine_ratio")
    return float(result["ratio"]) / float(engine) if engine else None


def cpu_name(cpu: dict[str, Jsonable] | None) -> str | None:
    """'AMD EPYC, 2 threads' from a run's `cpu` record (chatlab.backends.precision.cpu_info)."""
    if not cpu:
        return None
    return f"{cpu.get('model') or 'an unnamed CPU'}, {cpu.get('threads')} threads"


def ceiling_line(result: dict[str, Jsonable], cpu: str | None = None) -> str:
    """One line: the two ratios, the share kept, whether that reaches CEILING_TARGET, the CPU."""
    share = kept(result)
    where = f" on {cpu}" if cpu else ""
    if share is None:
        return (f"server {float(result['ratio']):.2f}x{where}; no engine ceiling measured (the "
                "engine runs one sequence at a time): nothing to compare it with")
    keep = CEILING_TARGET
    verdict = (f"at least the {keep:.0%} it should keep" if share >= keep
               else f"less than the {keep:.0%} it should keep ({(keep - share) * 100:.0f} points short)")
    return (f"{result['clients']} clients vs 1: server {float(result['ratio']):.2f}x, engine alone "
            f"{float(result['engine_ratio']):.2f}x (its batching ceiling){where}; the server keeps "
            f"{share:.0%} of it, {verdict}")


def serving_table(result: dict[str, Jsonable]) -> str:
    """A stored `chatlab bench serving --clients N` result: aggregate tokens/s, 1 vs N clients,
    and time to first token under load."""
    n = result["clients"]
    lines = [run_label(result),
             f"{result['backend']}/{result['weight_format']} at {result['precision']}, "
             f"{result['tokens']} tokens per client, {result['rounds']} rounds (medians)",
             f"{'clients':>8} {'aggregate tok/s':>16}",
             f"{1:>8} {result['one_client_tok_s']:>16.1f}",
             f"{n:>8} {result['n_clients_tok_s']:>16.1f}",
             f"ratio {result['ratio']:.2f}x; TTFT at {n} clients: p50 "
             f"{result['ttft_p50_s'] * 1000:.0f} ms, p95 {result['ttft_p95_s'] * 1000:.0f} ms"]
    if "engine_ratio" in result:
        lines.append(f"the pipeline alone (no server, same prompts): ratio {result['engine_ratio']:.2f}x "
                     f"({result['engine_one_tok_s']:.1f} -> {result['engine_n_tok_s']:.1f} tok/s)")
    run = result.get("run") or {}
    lines.append(ceiling_line(result, cpu_name(result.get("cpu") or run.get("cpu"))))
    eq = result.get("greedy_equality")
    if eq:
        lines.append(f"greedy replies equal to chatlab's OpenVINO loop at f32: "
                     f"{eq['identical']}/{eq['prompts']}")
    return "\n".join(lines)


def store(name: str, text: str, command: str, machine: str) -> Path:
    """`text`, the JSON a bench run printed, labelled (`label`) and written to data/bench/NAME."""
    try:
        result = json.loads(text)
    except ValueError as err:
        raise ChatlabError(f"stdin is not the JSON of a bench run ({err}); pipe `chatlab bench --json` in") from None
    folder = data_dir() / FOLDER
    folder.mkdir(exist_ok=True)
    out = folder / name
    out.write_text(json.dumps(label(result, command, machine), indent=2) + "\n", encoding="utf-8")
    return out
