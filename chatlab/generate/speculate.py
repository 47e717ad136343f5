"""Prompt-lookup drafts: the tokens that followed an earlier occurrence of the last `ngram` are a
guess, verified in one pass; sized by how the last went, paused after `MISSES` empty drafts."""
from __future__ import annotations

from dataclasses import dataclass

from chatlab.errors import ChatlabError
from chatlab.generate.sampling import _is_int
from chatlab.protocols import PaddedVerifyBackend, RollbackBackend, SpeculativeBackend, StepBackend

METHODS = ["prompt-lookup"]
DRAFT_TOKENS_RANGE = (1, 16)
NGRAM_RANGE = (1, 8)
MISSES = 4  # drafts in a row with nothing accepted before pausing
FIRST_DRAFT = MIN_DRAFT = 2
FIRST_PAUSE, MAX_PAUSE = 8, 128  # tokens decoded plainly before the next probe


@dataclass(frozen=True)
class Speculation:
    """How to speculate (`--speculate prompt-lookup --draft-tokens K --ngram N`)."""

    method: str = "prompt-lookup"
    draft_tokens: int = 3
    ngram: int = 3
    min_ngram: int = 2
    # size each guess by the last one (unless the backend pads its passes), pause after misses
    adaptive: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ChatlabError(f"speculation method {self.method!r} is unknown; use one of "
                               f"{', '.join(METHODS)}")
        for name, (lo, hi), what in (
                ("draft_tokens", DRAFT_TOKENS_RANGE, "tokens guessed per verify pass"),
                ("ngram", NGRAM_RANGE, "the longest suffix looked up")):
            value = getattr(self, name)
            if not _is_int(value) or not lo <= value <= hi:
                raise ChatlabError(f"{name}={value!r} is invalid; it must be an integer from {lo} "
                                   f"to {hi} ({what})")
        if not _is_int(self.min_ngram) or not 1 <= self.min_ngram <= max(self.ngram, 2):
            raise ChatlabError(f"min_ngram={self.min_ngram!r} is invalid; it must be an integer "
                               f"from 1 to ngram={self.ngram}")

    @property
    def shortest(self) -> int:
        """The shortest n-gram looked up (ngram=1 asks for single tokens, whatever min_ngram)."""
        return min(self.min_ngram, self.ngram)


def check_backend(backend: StepBackend) -> SpeculativeBackend:
    """The backend, if it can verify several tokens and roll its cache back; else ChatlabError."""
    if not isinstance(backend, RollbackBackend):
        raise ChatlabError(f"speculative decoding needs a backend that can roll its KV cache "
                           f"back; {backend.name} cannot drop rejected tokens from its cache "
                           f"({backend!r}; OpenVINO's stateful sdpa graph keeps its cache in state "
                           "variables that only grow). Use --backend torch, or openvino with its "
                           "default paged attention, or leave out --speculate")
    return backend


def prepare(backend: object, spec: Speculation) -> bool:
    """Set the backend up for `spec`'s guesses; whether its verify passes are now padded."""
    if not isinstance(backend, PaddedVerifyBackend):
        return False
    backend.prepare_verify(spec.draft_tokens + 1)
    return True


class PromptLookup:
    """Drafts for one reply, from an index of every n-gram's latest position."""

    def __init__(self, spec: Speculation, prompt_ids: list[int], fixed_width: bool = False) -> None:
        self.spec = spec
        self.ids: list[int] = list(prompt_ids)
        # n -> {n-gram: end of its latest occurrence}; the current suffix itself is never indexed
        self.index: dict[int, dict[tuple[int, ...], int]] = {
            n: {} for n in range(spec.shortest, spec.ngram + 1)}
        self.indexed = 0
        self.misses = 0
        # the next guess's length: sized by the last pass when adaptive, else always k
        self.sized = spec.adaptive and not fixed_width
        self.size = min(FIRST_DRAFT, spec.draft_tokens) if self.sized else spec.draft_tokens
        self.pause = 0  # tokens left before drafting again
        self.next_pause = FIRST_PAUSE
        self.drafts = self.drafted = self.accepted = 0  # what the bench and tests read

    def add(self, token: int) -> None:
        self.ids.append(token)
        if self.pause:
            self.pause -= 1

    def _catch_up(self) -> None:
        ids = self.ids
        for end in range(max(self.indexed, 1), len(ids)):
            for n, table in self.index.items():
                if end >= n:
                    table[tuple(ids[end - n:end])] = end
        self.indexed = max(self.indexed, len(ids))

    def draft(self, limit: int) -> list[int]:
        """Up to min(the next guess's size, limit) guessed tokens; [] when paused or nothing matches."""
        limit = min(limit, self.size)
        if limit <= 0 or self.pause:
            return []
        self._catch_up()
        ids = self.ids
        for n in range(self.spec.ngram, self.spec.shortest - 1, -1):
            if n > len(ids) - 1:
                continue
            end = self.index[n].get(tuple(ids[-n:]))
            if end is not None:
                return ids[end:end + limit]
        return []

    def result(self, drafted: int, accepted: int) -> None:
        """Record a verify pass: size the next guess (twice a guess kept whole, else what was
        kept plus one), and back off after MISSES empty ones in a row."""
        self.drafts += 1
        self.drafted += drafted
        self.accepted += accepted
        if self.sized:
            k = self.spec.draft_tokens
            grown = 2 * drafted if accepted == drafted else accepted + 1
            self.size = max(min(MIN_DRAFT, k), min(k, grown))
        if accepted:
            self.misses, self.next_pause = 0, FIRST_PAUSE
            return
        self.misses += 1
        if self.spec.adaptive and self.misses >= MISSES:
            self.pause, self.misses = self.next_pause, 0
            self.next_pause = min(2 * self.next_pause, MAX_PAUSE)

    def stats(self) -> dict[str, float]:
        return {"verify_passes": float(self.drafts), "drafted_tokens": float(self.drafted),
                "accepted_tokens": float(self.accepted),
                "acceptance": self.accepted / self.drafted if self.drafted else 0.0}
