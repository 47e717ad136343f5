"""The u8-cache drift measurement: its one sentence, and the stored result it comes from."""
from __future__ import annotations

from chatlab.bench.kvdrift import PROMPTS, drift_line


def fake(u8: int, f32: int) -> dict:
    n = len(PROMPTS)
    return {"model": "m", "tokens": 128, "prompts": list(PROMPTS), "weights": "fp32 export",
            "precision": "f32", "reference": "PyTorch f32",
            "caches": {"u8": {"differ": u8, "first_difference": [5] * u8 + [None] * (n - u8)},
                       "f32": {"differ": f32, "first_difference": [None] * n}}}


def test_the_drift_line_says_both_caches_once() -> None:
    line = drift_line(fake(3, 0))
    assert "u8 KV cache 3 of 8 replies differ, f32 KV cache 0 of 8" in line
    assert "8 prompts x 128 greedy tokens vs PyTorch f32" in line


def test_the_stored_measurement_is_labelled_and_consistent() -> None:
    from chatlab.bench.stored import load_stored

    result = load_stored("kv-u8-drift.json")   # refuses a result without its machine and date
    for cache in ("u8", "f32"):
        firsts = result["caches"][cache]["first_difference"]
        assert len(firsts) == len(result["prompts"])
        assert result["caches"][cache]["differ"] == sum(f is not None for f in firsts)
        assert all(f is None or 0 <= f < result["tokens"] for f in firsts)
