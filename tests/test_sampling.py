"""Sampling parameters and the sampler, on synthetic logits (no model needed)."""
from __future__ import annotations

import numpy as np
import pytest

from chatlab.errors import ChatlabError
from chatlab.generate.sampling import Sampler, SamplingParams, top_k_probs, top_p_filter


@pytest.mark.parametrize("kwargs, needle", [
    ({"temperature": -0.1}, ">= 0"),
    ({"temperature": float("nan")}, ">= 0"),
    ({"top_p": 0.0}, "(0, 1]"),
    ({"top_p": 1.5}, "(0, 1]"),
    ({"max_new_tokens": 0}, ">= 1"),
    ({"top_k": -1}, ">= 0"),
    ({"repetition_penalty": 0}, "> 0"),
    ({"stop": [""]}, "non-empty"),
    ({"stop_ids": [-3]}, "token ids"),
])
def test_bad_values_name_the_valid_range(kwargs, needle):
    with pytest.raises(ChatlabError) as err:
        SamplingParams(**kwargs)
    name = next(iter(kwargs))
    assert name in str(err.value) and needle in str(err.value)


def test_max_tokens_beyond_context_window():
    params = SamplingParams(max_new_tokens=100)
    params.validate(context_length=8192, prompt_tokens=8000)  # fits: 8100 <= 8192
    with pytest.raises(ChatlabError, match=r"context window is 8192.*max_new_tokens <= 192"):
        SamplingParams(max_new_tokens=200).validate(context_length=8192, prompt_tokens=8000)


def test_lone_stop_string_is_accepted():
    assert SamplingParams(stop="###").stop == ["###"]  # type: ignore[arg-type]


def logits_row(n: int = 50, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=n).astype(np.float32) * 3


def test_greedy_is_argmax():
    row = logits_row()
    assert Sampler(SamplingParams())(row.copy()) == int(np.argmax(row))
    assert Sampler(SamplingParams(temperature=1.0, top_k=1))(row.copy()) == int(np.argmax(row))


def test_seed_makes_sampling_reproducible():
    row = logits_row()

    def draws(seed: int) -> list[int]:
        sampler = Sampler(SamplingParams(temperature=1.0, top_p=0.95, seed=seed))
        return [sampler(row.copy()) for _ in range(30)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_top_k_restricts_to_best_k():
    row = logits_row()
    best3 = set(np.argsort(-row)[:3].tolist())
    s = Sampler(SamplingParams(temperature=5.0, top_k=3, seed=0))
    assert {s(row.copy()) for _ in range(200)} == best3  # high T: all three appear, nothing else


def test_top_p_keeps_smallest_prefix_reaching_mass():
    ids = np.array([4, 2, 9, 1])
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    kept, p = top_p_filter(ids, probs, 0.75)
    assert kept.tolist() == [4, 2] and np.isclose(p.sum(), 1) and np.allclose(p, [0.625, 0.375])
    kept, _ = top_p_filter(ids, probs, 0.1)
    assert kept.tolist() == [4]  # always at least the best token


def test_temperature_sharpens_and_flattens():
    row = np.array([2.0, 1.0, 0.0], dtype=np.float32)
    _, cold = top_k_probs(row, 3, 0.5)
    _, warm = top_k_probs(row, 3, 2.0)
    _, plain = top_k_probs(row, 3, 1.0)
    assert cold[0] > plain[0] > warm[0]
    assert np.allclose(plain, np.exp(row) / np.exp(row).sum())


def test_repetition_penalty_demotes_seen_tokens():
    row = np.array([3.0, 2.9, -1.0, -1.1], dtype=np.float32)
    s = Sampler(SamplingParams(repetition_penalty=1.5))
    s.seen = [0, 2]
    assert s(row) == 1  # 3.0 / 1.5 = 2.0 < 2.9
    assert np.allclose(row, [2.0, 2.9, -1.5, -1.1])  # negative logits are multiplied


def test_sampling_frequencies_follow_the_distribution():
    row = np.log(np.array([0.6, 0.3, 0.1], dtype=np.float32))
    s = Sampler(SamplingParams(temperature=1.0, seed=3))
    counts = np.bincount([s(row.copy()) for _ in range(3000)], minlength=3) / 3000
    assert np.allclose(counts, [0.6, 0.3, 0.1], atol=0.04)
