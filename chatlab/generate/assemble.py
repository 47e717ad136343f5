"""Token ids in, the loop's events out (detokenizing, stops, the final record), for chatlab's loop and
the genai path: text waits while it is half a character or could start a stop string."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable

from chatlab._thirdparty import Decoder
from chatlab.generate.logprobs import TokenLogprob

REPLACEMENT = "\ufffd"
CONTEXT_IDS = 5  # tokens of left context: enough for any tokenizer's spacing decisions


class IncrementalDetokenizer:
    """Decodes a short window of recent tokens without and with the new one and emits the
    difference (tokenizers add or drop spaces by context); the window slides once text is out."""

    def __init__(self, tokenizer: Decoder) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # window start: context tokens already shown
        self.read = 0  # tokens up to here are shown as text

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def add(self, token_id: int) -> str:
        """Append one token; return the text that is now complete (possibly "")."""
        self.ids.append(token_id)
        shown = self._decode(self.ids[self.prefix:self.read])
        full = self._decode(self.ids[self.prefix:])
        if full.endswith(REPLACEMENT) or len(full) <= len(shown):
            return ""  # an incomplete character, or nothing yet
        shown = os.path.commonprefix([shown, full])  # shorter where the tokenizer rewrote the context
        delta = full[len(shown):]
        self.prefix = max(0, len(self.ids) - CONTEXT_IDS)
        self.read = len(self.ids)
        return delta

    def flush(self) -> str:
        """At the end: whatever is still pending, replacement characters included."""
        shown = self._decode(self.ids[self.prefix:self.read])
        full = self._decode(self.ids[self.prefix:])
        self.prefix = self.read = len(self.ids)
        return full[len(shown):] if full.startswith(shown) else ""


@dataclass
class StopResult:
    text: str  # safe to show now
    stop: str | None = None  # the stop string that matched, when generation must end


class StopMatcher:
    """Holds back exactly the tail that is still a prefix of some stop string."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in dict.fromkeys(stops) if s]  # dedupe, keep order
        self.held = ""  # text decoded but not yet shown: it may be the start of a stop string

    def feed(self, delta: str) -> StopResult:
        if not self.stops:
            return StopResult(delta)
        buf = self.held + delta
        hit = self._earliest(buf)
        if hit is not None:
            at, stop = hit
            self.held = ""
            return StopResult(buf[:at], stop)
        keep = self._held_suffix(buf)
        self.held = buf[len(buf) - keep:] if keep else ""
        return StopResult(buf[:len(buf) - keep])

    def flush(self) -> str:
        """Generation ended for another reason: what was held back is ordinary text after all."""
        text, self.held = self.held, ""
        return text

    def _earliest(self, buf: str) -> tuple[int, str] | None:
        # the earliest occurrence wins; at the same place, the longest
        best: tuple[int, str] | None = None
        for s in self.stops:
            at = buf.find(s)
            if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(s) > len(best[1]))):
                best = (at, s)
        return best

    def _held_suffix(self, buf: str) -> int:
        """Length of the longest tail of `buf` that is a proper prefix of a stop string."""
        keep = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(buf)), keep, -1):
                if buf.endswith(s[:n]):
                    keep = n
                    break
        return keep


@dataclass
class TextDelta:
    text: str
    token_ids: list[int]  # the tokens whose text starts within this delta
    logprobs: list[TokenLogprob] | None = None  # one per token_ids entry, when params.logprobs


@dataclass
class Finished:
    finish_reason: str  # "stop" or "length"
    text: str  # the whole reply, stop string removed
    token_ids: list[int]  # every sampled token, the stop id included when one ended the reply
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | int | None = None  # the stop string or stop id that matched
    timings: dict[str, float] = field(default_factory=dict)
    # with params.logprobs: the tokens no TextDelta carried (a stop id or string, empty text)
    logprobs: list[TokenLogprob] | None = None
    # With speculation (chatlab.generate.speculate): verify passes, drafted and accepted tokens
    speculation: dict[str, float] | None = None


Event = TextDelta | Finished


class TextAssembler:
    """One reply's text, token by token: `add` a token, `finish()` with Finished."""

    def __init__(self, decoder: Decoder, stop: Iterable[str], stop_ids: Iterable[int],
                 prompt_tokens: int, with_logprobs: bool = False) -> None:
        self.detok = IncrementalDetokenizer(decoder)
        self.stops = StopMatcher(list(stop))
        self.stop_ids = set(stop_ids)
        self.prompt_tokens = prompt_tokens
        self.with_logprobs = with_logprobs
        # tokens not yet attached to an event, each with where its text starts
        self.pending: list[tuple[int, int, TokenLogprob | None]] = []
        self.out_ids: list[int] = []
        self.pieces: list[str] = []
        self.decoded = 0  # characters out of the detokenizer (where the next token's text starts)
        self.shown = 0  # characters shown in deltas
        self.stop_lp: list[TokenLogprob] = []  # the stop id's entry: never part of a delta
        self.reason = "length"
        self.stop_reason: int | str | None = None  # the stop id, or the stop word
        self.done = False

    def add(self, token: int, lp: TokenLogprob | None = None) -> TextDelta | None:
        self.out_ids.append(token)
        if token in self.stop_ids:
            self.reason, self.stop_reason, self.done = "stop", token, True
            self.stop_lp = [lp] if lp is not None else []
            return None
        self.pending.append((token, self.decoded, lp))
        delta = self.detok.add(token)
        self.decoded += len(delta)
        result = self.stops.feed(delta)
        out = self._show(result.text) if result.text else None
        if result.stop is not None:
            self.reason, self.stop_reason, self.done = "stop", result.stop, True
        return out

    def halt(self) -> None:
        """The reply ends here for the caller's reason (not length, not a stop id or string)."""
        self.reason, self.done = "stop", True

    def finish(self, timings: dict[str, float] | None = None) -> list[Event]:
        events: list[Event] = []
        if not isinstance(self.stop_reason, str):
            # held-back text is ordinary output now, unless it completes a stop string after all
            result = self.stops.feed(self.detok.flush())
            tail = result.text if result.stop is not None else result.text + self.stops.flush()
            if result.stop is not None:
                self.reason, self.stop_reason = "stop", result.stop
            if tail:
                events.append(self._show(tail))
        _, rest = self._take()  # tokens of a removed stop string, or that decoded to nothing
        events.append(Finished(self.reason, "".join(self.pieces), self.out_ids, self.prompt_tokens,
                               len(self.out_ids), self.stop_reason, dict(timings or {}),
                               None if rest is None else rest + self.stop_lp))
        return events

    def _show(self, text: str) -> TextDelta:
        self.pieces.append(text)
        self.shown += len(text)
        return TextDelta(text, *self._take(self.shown))

    def _take(self, shown: int | None = None) -> tuple[list[int], list[TokenLogprob] | None]:
        """The pending tokens whose text starts before character `shown` (all if None)."""
        pending = self.pending
        cut = len(pending) if shown is None else sum(1 for _, start, _ in pending if start < shown)
        taken, self.pending = pending[:cut], pending[cut:]
        lps = [lp for _, _, lp in taken if lp is not None] if self.with_logprobs else None
        return [t for t, _, _ in taken], lps
