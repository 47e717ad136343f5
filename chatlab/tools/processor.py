"""The logits processor of chatlab.generate that applies one compiled xgrammar grammar.

Before each sampled token the processor sets the logits of every token the grammar forbids to
-inf; after it, the matcher accepts the token. Once the grammar is complete only a stop token
is allowed, and accepting it terminates the matcher (the loop then finishes with "stop").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    import numpy as np
    import xgrammar as xgr


class GrammarProcessor:
    """The logits_processor of chatlab.generate: mask(logits), accept(token), is_terminated()."""

    def __init__(self, compiled: "xgr.CompiledGrammar", vocab_size: int, description: str) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.vocab_size = vocab_size
        self.description = description
        self.rejected: list[int] = []    # tokens the matcher refused (only if masking was skipped)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        import numpy as np
        import torch

        if isinstance(logits, np.ndarray) and not logits.flags.writeable:
            logits = logits.copy()
        tensor = logits if isinstance(logits, torch.Tensor) else torch.from_numpy(logits)
        self.matcher.fill_next_token_bitmask(self.bitmask)
        if not bool(self.bitmask[0].any()):  # a dead end: sampling would see only -inf (NaN)
            raise ChatlabError(f"the grammar ({self.description}) allows no next token: the "
                               "schema has a part no finite value matches; simplify the schema")
        self.xgr.apply_token_bitmask_inplace(tensor, self.bitmask[0], vocab_size=self.vocab_size)
        tensor[self.vocab_size:] = float("-inf")    # padded rows of lm_head are never valid
        return logits

    def accept(self, token_id: int) -> None:
        if not self.matcher.accept_token(int(token_id)):
            self.rejected.append(int(token_id))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def __repr__(self) -> str:
        return f"GrammarProcessor({self.description})"

