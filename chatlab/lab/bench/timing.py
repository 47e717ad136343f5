"""What one bench run measures: time to the first new token, decode speed after it, the tokens.
Speed counts tokens, not callbacks: every stamp carries how many tokens it delivered."""
from __future__ import annotations

from dataclasses import dataclass

from chatlab.errors import ChatlabError

# (clock reading, how many new tokens arrived with it)
Stamp = tuple[float, int]


@dataclass
class Timing:
    ttft_s: float
    decode_tok_s: float
    tokens: list[int]
    spec: dict[str, float] | None = None  # speculation's counts, when the engine speculates


def decode_speed(stamps: list[Stamp]) -> float:
    """Tokens after the first over the time from the first token to the last (0 when all the
    tokens came at once): the same speed whether they came one per stamp or several."""
    count = sum(n for _, n in stamps)
    span = stamps[-1][0] - stamps[0][0] if stamps else 0.0
    return (count - 1) / span if count > 1 and span > 0 else 0.0


def from_stamps(t0: float, stamps: list[Stamp], tokens: list[int]) -> Timing:
    """A Timing from the call's start `t0`, the streamer's stamps and the new tokens; stamps that
    count other than the tokens are an error rather than a wrong speed."""
    if not stamps:
        raise ChatlabError("the engine streamed no new token; a bench run needs at least one")
    delivered = sum(n for _, n in stamps)
    if delivered != len(tokens):
        raise ChatlabError(f"the streamer's stamps account for {delivered} tokens but {len(tokens)} "
                           "came out; each stamp must carry the number of tokens it delivered")
    return Timing(stamps[0][0] - t0, decode_speed(stamps), tokens)
