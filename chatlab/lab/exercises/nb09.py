"""Notebook 09's exercises: where two prompts part, what the system turn costs, bf16 rounding by hand."""
from __future__ import annotations

import numpy as np

from chatlab.lab.exercises import Case, Exercise, register
from chatlab.lab.exercises.nb05 import bf16_round_reference
from chatlab.lab.finetune import first_difference


register(Exercise("nb09.first_difference", lambda: [
    Case(([1, 2, 3], [1, 2, 4]), "the last id differs"),
    Case(([1, 2, 3], [1, 2, 3]), "equal: None"),
    Case(([1, 2], [1, 2, 3]), "a prefix: the length of the shorter"),
    Case(([5], [6, 7]), "different from the start"),
], reference=first_difference))


def system_tokens_reference(with_system: list[int], without: list[int]) -> int | None:
    """k when `with_system[k:] == without` (the system turn is k ids long), else None."""
    k = len(with_system) - len(without)
    return k if k >= 0 and list(with_system[k:]) == list(without) else None


register(Exercise("nb09.system_tokens", lambda: [
    Case(([9, 8, 1, 2, 3], [1, 2, 3]), "two ids of system turn"),
    Case(([1, 2, 3], [1, 2, 3]), "no system turn"),
    Case(([9, 1, 2, 4], [1, 2, 3]), "the rest differs: None"),
    Case(([1], [1, 2]), "shorter than the other: None"),
], reference=system_tokens_reference))


def _arrays() -> list[Case]:
    rng = np.random.default_rng(0)
    ties = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 2 ** -130], dtype=np.float32)
    return [Case((np.array([1.0, -2.5, 0.0, 3.140625], dtype=np.float32),), "exact in bf16"),
            Case(((rng.standard_normal(8) * 100).astype(np.float32),), "random"),
            Case((ties,), "halfway cases round to even; a subnormal")]


register(Exercise("nb09.bf16_round", _arrays, reference=bf16_round_reference,
                  same=lambda got, expected: np.array_equal(np.asarray(got, dtype=np.float32), expected)))
