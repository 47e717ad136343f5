"""What the generation loop needs from a model: three calls and a few facts.

A backend owns one sequence at a time and its KV cache. `prefill(ids)` resets the cache, runs
the whole prompt in one pass and returns the logits of the last position; `step(id)` feeds one
more token and returns its logits. Logits are a 1-D float32 numpy row the loop may modify in
place (it is only valid until the next call). Everything else — sampling, stops, text — is the
loop's job, so each backend stays a thin adapter over its runtime.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from chatlab._thirdparty import HFTokenizer


class Backend:
    name: str = "backend"
    tokenizer: HFTokenizer
    context_length: int
    vocab_size: int
    eos_ids: list[int]  # the model's own end ids (generation_config), merged by the loop
    precision: str = "f32"  # the arithmetic the runtime really uses ("f32" or "bf16")
    threads: int | None = None  # compute threads the runtime really uses, when it says

    def prefill(self, ids: list[int]) -> np.ndarray:
        raise NotImplementedError

    def step(self, token_id: int) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    # Speculation and prefix reuse need two more calls; a backend that has them sets
    # `can_rollback`. `extend(ids, keep)` feeds several tokens after the cache in one pass and
    # returns the logits of the last `keep` of them, [keep, vocab]; `truncate(length)` drops
    # the cache past its first `length` tokens. `length` is the number of tokens cached.
    can_rollback: bool = False
    rollback_note: str = ""  # why not, for the error message
    length: int = 0

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        raise NotImplementedError(f"{self.name} cannot feed several tokens at once")

    def truncate(self, length: int) -> None:
        raise NotImplementedError(f"{self.name} cannot roll its cache back")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name} {self.precision} vocab={self.vocab_size} "
                f"ctx={self.context_length}>")


def eos_ids_from(folder: Path, tokenizer: HFTokenizer = None) -> list[int]:
    """generation_config's eos ids (int or list), else config's, else the tokenizer's."""
    for fname in ("generation_config.json", "config.json"):
        try:
            eos = json.loads((folder / fname).read_text()).get("eos_token_id")
        except (OSError, ValueError):
            continue
        if eos is not None:
            return [eos] if isinstance(eos, int) else [int(e) for e in eos]
    eos = getattr(tokenizer, "eos_token_id", None)
    return [eos] if isinstance(eos, int) else []


def context_length_from(folder: Path) -> int:
    config = json.loads((folder / "config.json").read_text())
    return int(config.get("max_position_embeddings") or config.get("seq_length") or 2048)
