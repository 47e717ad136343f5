"""Benchmark: the streaming parsers cost time linear in the output length.

    python -m chatlab.tools.bench

Each format's parser is fed a 1,000-token and a 10,000-token output (a long content or
thought part and one call with long arguments) in token-sized deltas of 4 characters. If a
parser rescanned its buffer on every delta, the time per 1k characters would grow ~10x with
the longer output; linear cost keeps the ratio near 1.
"""
from __future__ import annotations

import json
import time

from chatlab.tools import fold
from chatlab.tools.formats import FORMATS, ToolFormat
from chatlab.types import ToolCall, ToolSpec

CHARS_PER_TOKEN = 4
TOOLS = [ToolSpec("search", parameters={"type": "object"})]


def sample_output(fmt: ToolFormat, tokens: int) -> str:
    """About `tokens` tokens of text in `fmt`: half content or thought (where the format lets a
    reply hold text with its call, else inside the arguments), half the call's arguments."""
    half = tokens * CHARS_PER_TOKEN // 2
    prose = ("the quick brown fox jumps over the lazy dog " * (half // 44 + 1))[:half]
    extra = {} if fmt.content_with_calls else {"note": prose}
    call = ToolCall("call_0", "search", json.dumps({"query": prose, "limit": 5, **extra}))
    return fmt.reply_text(prose if fmt.content_with_calls else "", [call])


def stream_seconds(fmt: ToolFormat, text: str, repeats: int = 3) -> float:
    """Best time to stream `text` through a fresh parser, delta by delta, plus finish()."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        parser, events = fmt.parser(TOOLS), []
        for i in range(0, len(text), CHARS_PER_TOKEN):
            events += parser.feed(text[i:i + CHARS_PER_TOKEN])
        events += parser.finish()
        best = min(best, time.perf_counter() - t0)
        assert len(fold(events).tool_calls) == 1, f"{fmt}: the benchmark call was not parsed"
    return best


def main() -> None:
    print(f"{'format':<10}{'1k tokens':>14}{'10k tokens':>14}{'ratio':>8}   (ms per 1k chars)")
    for fmt in FORMATS.values():
        small, large = sample_output(fmt, 1_000), sample_output(fmt, 10_000)
        per_small = stream_seconds(fmt, small) / len(small) * 1e6
        per_large = stream_seconds(fmt, large) / len(large) * 1e6
        print(f"{fmt.name:<10}{per_small:>14.3f}{per_large:>14.3f}{per_large / per_small:>8.2f}")


if __name__ == "__main__":
    main()
