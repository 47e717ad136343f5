"""Sampling parameters and the sampler, on synthetic logits (no model needed)."""
from __future__ import annotations

import numpy as np
import pytest

from chatlab.errors import ChatlabError
from chatlab.generate.sampling import Sampler, SamplingParams, top_k_probs, top_p_filter


@pytest.mark.parametrize("kwargs, needle", [
    ({"temperature": -0.1}, "from 0 to 2"),
    ({"temperature": 2.5}, "from 0 to 2"),  # the same limit as the wire's (generate.limits)
    ({"temperature": float("nan")}, "from 0 to 2"),
    ({"top_p": 0.0}, "(0, 1]"),
    ({"top_p": 1.5}, "(0, 1]"),
    ({"max_new_tokens": 0}, ">= 1"),
    ({"top_k": -1}, ">= 0"),
    ({"repetition_penalty": 0}, "from 0.01 to 100"),
    ({"presence_penalty": 2.5}, "from -2 to 2"),
    ({"frequency_penalty": float("inf")}, "from -2 to 2"),
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
    s = Sampler(SamplingParams(temperature=2.0, top_k=3, seed=0))
    assert {s(row.copy()) for _ in range(400)} == best3  # high T: all three appear, nothing else


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


def test_validate_changes_nothing_and_checks_only_the_model() -> None:
    """The frozen plan's SamplingParams are final: validate() checks the window and the
    vocabulary, and leaves every field as it was."""
    params = SamplingParams(stop="###", logit_bias={"7": 5})  # type: ignore[arg-type, dict-item]
    before = repr(params)
    params.validate(context_length=300, prompt_tokens=10, vocab_size=50)
    assert repr(params) == before and params.logit_bias == {7: 5.0} and params.stop == ["###"]
    with pytest.raises(ChatlabError) as err:
        params.validate(vocab_size=5)
    assert err.value.param == "logit_bias"


def test_presence_and_frequency_penalties_follow_openai() -> None:
    """logit[j] -= presence * (count[j] > 0) + frequency * count[j], over the reply's tokens only."""
    s = Sampler(SamplingParams(presence_penalty=0.5, frequency_penalty=0.25))
    for token in (1, 1, 3):
        s.accept(token)
    row = np.array([1.0, 1.0, 1.0, 1.0], dtype=np.float32)
    s.penalize_reply(row)
    assert np.allclose(row, [1.0, 1.0 - 0.5 - 0.5, 1.0, 1.0 - 0.5 - 0.25])
    # greedy: token 0 and 1 tie on the raw row, the penalty decides for 0
    g = Sampler(SamplingParams(presence_penalty=1.0))
    g.accept(1)
    assert g(np.array([1.0, 1.5, 0.0], dtype=np.float32)) == 0  # 1.5 - 1.0 < 1.0
    off = Sampler(SamplingParams())
    off.accept(1)
    assert off(np.array([1.0, 1.5, 0.0], dtype=np.float32)) == 1 and off.counts == {}


def test_penalties_in_the_loop_change_a_repeating_reply() -> None:
    """Through generate(): a backend whose best token is always 5 repeats it; a frequency
    penalty makes the loop move on (the penalty is applied, not just accepted)."""
    from chatlab.generate import generate

    class Repeats:
        context_length, vocab_size, eos_ids = 64, 8, []

        class tokenizer:  # noqa: N801 - the loop reads backend.tokenizer
            @staticmethod
            def decode(ids: list[int], **_: object) -> str:
                return "".join(chr(97 + i) for i in ids)

        def prefill(self, ids: list[int]) -> np.ndarray:
            return self.step(0)

        def step(self, token: int) -> np.ndarray:
            return np.array([0, 0, 0, 0, 2.0, 3.0, 0, 0], dtype=np.float32)

    plain = list(generate(Repeats(), [1], SamplingParams(max_new_tokens=4)))[-1].token_ids
    pushed = list(generate(Repeats(), [1], SamplingParams(max_new_tokens=4, frequency_penalty=2.0)))[-1]
    assert plain == [5, 5, 5, 5] and pushed.token_ids[:2] == [5, 4]


def test_the_plans_params_are_not_checked_again_by_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan validates against the model once and its params say so; generate() checks only
    params it was handed unchecked (a direct caller's), or changed since the check."""
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine, parse_request
    from chatlab.generate import generate
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    engine = ChatEngine(ScriptedBackend(tokenizer_for(get_template("chatml")), ["Hi."]), "m", template="chatml")
    plan = engine.check(parse_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}))
    params = plan.params[0]
    assert params.checked(engine.context_length, len(plan.prompt_ids), engine.vocab_size)
    calls: list[int] = []
    real = SamplingParams.validate
    monkeypatch.setattr(SamplingParams, "validate", lambda self, *a, **k: (calls.append(1), real(self, *a, **k))[1])
    engine.chat(plan)
    assert calls == []  # the loop trusted the plan's check
    list(generate(engine.backend, list(plan.prompt_ids), SamplingParams(max_new_tokens=5)))
    assert calls == [1]  # a direct caller's params are checked
    params.max_new_tokens = 10**6  # changed after the check: checked again, and refused
    with pytest.raises(ChatlabError, match="does not fit"):
        list(generate(engine.backend, list(plan.prompt_ids), params))
