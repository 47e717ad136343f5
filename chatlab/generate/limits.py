"""The sampling limits, defined once for the request schema and SamplingParams: OpenAI's ranges,
and vLLM's for the extensions (bounded both ways: extreme penalties overflow logits into NaN)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from chatlab._thirdparty import Jsonable


@dataclass(frozen=True)
class Range:
    """A closed or half-open numeric range with the words a user reads when outside it."""

    low: float
    high: float | None = None  # None: unbounded above
    low_open: bool = False  # True: `low` itself is excluded
    note: str = ""  # e.g. "0 = greedy"

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and (self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.high is None:
            text = f"{'>' if self.low_open else '>='} {_num(self.low)}"
        elif self.low_open:
            text = f"in ({_num(self.low)}, {_num(self.high)}]"
        else:
            text = f"from {_num(self.low)} to {_num(self.high)}"
        return f"{text} ({self.note})" if self.note else text

    def field(self) -> dict[str, Jsonable]:
        """The same range as pydantic `Field` keyword arguments (the OpenAPI schema shows them)."""
        out: dict[str, Jsonable] = {"gt" if self.low_open else "ge": self.low}
        if self.high is not None:
            out["le"] = self.high
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


TEMPERATURE = Range(0.0, 2.0, note="0 = greedy")
TOP_P = Range(0.0, 1.0, low_open=True, note="1 = off")
TOP_K = Range(0, note="0 = off")
REPETITION_PENALTY = Range(0.01, 100.0, note="1 = off")
PRESENCE_PENALTY = Range(-2.0, 2.0, note="0 = off")
FREQUENCY_PENALTY = Range(-2.0, 2.0, note="0 = off")
LOGIT_BIAS = Range(-100.0, 100.0)
MAX_NEW_TOKENS = Range(1)
# below this 1/T overflows into NaN probabilities: treated as 0 (greedy), as vLLM does
MIN_TEMPERATURE = 1e-5
