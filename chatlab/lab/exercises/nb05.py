"""Notebook 05's exercises: a stored benchmark, bf16's rounding error, what batching gives each client."""
from __future__ import annotations

import numpy as np

from chatlab._thirdparty import Jsonable
from chatlab.lab.bench.report import load_stored
from chatlab.lab.exercises import Case, Exercise, register


def fastest_reference(result: dict[str, Jsonable]) -> tuple[str, float]:
    """(the engine with the best median decode tok/s, chatlab-openvino-int8's rate over chatlab-torch's)."""
    rows = {r["name"]: r for r in result["engines"]}
    fastest = max(rows, key=lambda n: rows[n]["decode_tok_s"])
    return fastest, rows["chatlab-openvino-int8"]["decode_tok_s"] / rows["chatlab-torch"]["decode_tok_s"]


def _made_up() -> dict[str, Jsonable]:
    return {"engines": [{"name": "chatlab-torch", "decode_tok_s": 30.0},
                        {"name": "chatlab-openvino-int8", "decode_tok_s": 24.0},
                        {"name": "other", "decode_tok_s": 10.0}]}


register(Exercise("nb05.fastest", lambda full=None: [
    Case((full or load_stored("full-run.json"),), "the stored full run"),
    Case((_made_up(),), "a made-up run where the PyTorch loop wins"),
], reference=fastest_reference,
    same=lambda got, expected: got[0] == expected[0] and abs(float(got[1]) - expected[1]) < 1e-6))


def bf16_round_reference(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 by torch, back as float32."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).float().numpy()


def bf16_error_reference(x: np.ndarray) -> float:
    """The largest relative error of rounding float32 values to bf16 and back."""
    x = np.asarray(x, dtype=np.float32)
    return float((np.abs(bf16_round_reference(x) - x) / np.abs(x)).max())


def _bf16_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    return [Case(((rng.standard_normal(10_000) * 100).astype(np.float32),), "10,000 random numbers"),
            Case((np.array([1.0, 2.0, 0.5], dtype=np.float32),), "exact in bf16: 0"),
            Case((np.array([1 + 2 ** -9 + 2 ** -20], dtype=np.float32),), "just above halfway")]


register(Exercise("nb05.bf16_error", _bf16_cases, reference=bf16_error_reference,
                  same=lambda got, expected: abs(float(got) - expected) <= 1e-9))


def per_client_reference(served: dict[str, Jsonable]) -> tuple[float, float, float]:
    """(tok/s of a client alone, tok/s of each of the N clients at once, all N together)."""
    return (served["one_client_tok_s"], served["n_clients_tok_s"] / served["clients"],
            served["n_clients_tok_s"])


register(Exercise("nb05.per_client", lambda served=None: [
    Case((served or load_stored("serve-8-clients.json"),), "the stored batched run"),
    Case(({"clients": 4, "one_client_tok_s": 50.0, "n_clients_tok_s": 120.0},), "four made-up clients"),
], reference=per_client_reference,
    same=lambda got, expected: len(got) == 3 and all(abs(float(g) - e) < 1e-6 for g, e in zip(got, expected))))
