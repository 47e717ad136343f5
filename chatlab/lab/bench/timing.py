"""What one bench run measures: time to the first new token, decode speed after it, the tokens."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Timing:
    ttft_s: float
    decode_tok_s: float
    tokens: list[int]
    spec: dict[str, float] | None = None  # speculation's counts, when the engine speculates


def from_stamps(t0: float, stamps: list[float], tokens: list[int]) -> Timing:
    """A Timing from the call's start `t0` and one clock stamp per new token: decode speed is the
    tokens after the first over the time after the first (0 when only one token came)."""
    decode = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    return Timing(stamps[0] - t0, decode, tokens)
