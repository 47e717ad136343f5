"""Stop strings over a stream of text deltas, with prefix-aware holdback.

A stop string can arrive split over several tokens ("\\nObser" + "vation:"), so text cannot be
forwarded the moment it is decoded. The matcher holds back exactly the tail of the text that is
still a prefix of some stop string, and releases it as soon as the next delta shows it is not:
"\\nObs" is held, "\\nObsidian" is released at once, "\\nObservation:" is cut and never shown.
Text before the stop string is emitted; the stop string and everything after it are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StopResult:
    text: str  # safe to show now
    stop: str | None = None  # the stop string that matched, when generation must end


class StopMatcher:
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
        # The earliest occurrence wins; among stops starting at the same place, the longest, so
        # that with stops ["\n", "\nObservation:"] the whole marker is removed.
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
