"""How close the server comes to its engine's own batching gain.

N clients at once cannot get N times one client's tokens on shared cores, so the server is
judged against the ceiling measured beside it (the same prompts fed straight to the engine):
it should keep at least `TARGET` of the engine's gain, the rest being what HTTP, the SSE
framing and the client processes cost on the same cores.
"""
from __future__ import annotations

from chatlab._thirdparty import Jsonable

TARGET = 0.90  # share of the engine's own batching gain the server should keep


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
    """One line: the two ratios, the share kept, whether that is within TARGET, and the CPU."""
    share = kept(result)
    where = f" on {cpu}" if cpu else ""
    if share is None:
        return (f"server {float(result['ratio']):.2f}x{where}; no engine ceiling measured (the "
                "engine runs one sequence at a time): nothing to compare it with")
    verdict = (f"at least the {TARGET:.0%} it should keep" if share >= TARGET
               else f"less than the {TARGET:.0%} it should keep ({(TARGET - share) * 100:.0f} points short)")
    return (f"{result['clients']} clients vs 1: server {float(result['ratio']):.2f}x, engine alone "
            f"{float(result['engine_ratio']):.2f}x (its batching ceiling){where}; the server keeps "
            f"{share:.0%} of it, {verdict}")
