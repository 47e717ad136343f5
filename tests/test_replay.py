"""chatlab.bench.replay models speculation from recorded greedy replies. Its passes must be the
real loop's passes (else the model says nothing about the loop), and the default draft schedule
must beat the first one on the stored replies of every bench task without slowing the no-copy
story (the choice documented in chatlab.generate.speculate)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from chatlab.bench.replay import PASS_COST, REPLIES, pass_cost, replay, replay_passes, replay_tasks
from chatlab.data import data_path
from chatlab.generate import SamplingParams, generate
from chatlab.generate.speculate import Speculation
from markov_backend import MarkovBackend


class Logged(MarkovBackend):
    """Records the guess length of every pass after the prefill (0: a one-token step)."""

    def __init__(self, *a: object) -> None:
        super().__init__(*a)
        self.log: list[int] = []

    def extend(self, ids, keep=1):
        self.log.append(len(ids) - 1)
        return super().extend(ids, keep)


@pytest.mark.parametrize("spec", [Speculation(), Speculation(draft_tokens=3, ngram=2, min_ngram=1),
                                  Speculation(draft_tokens=4, adaptive=False)], ids=["default", "k3n2", "fixed"])
def test_replayed_passes_are_the_loops_passes(spec: Speculation) -> None:
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(30):
        b = Logged(rng.normal(0, 3, (4, 4)), rng.normal(0, 3, 4))
        prompt = [int(t) for t in rng.integers(0, 4, 12)]
        *_, plain = generate(b, prompt, SamplingParams(max_new_tokens=40))
        b.log = []
        *_, fast = generate(b, prompt, SamplingParams(max_new_tokens=40), speculate=spec)
        assert fast.token_ids == plain.token_ids
        assert replay_passes(prompt, list(plain.token_ids), spec) == b.log
        compared += sum(1 for k in b.log if k)
    assert compared > 0  # some passes did verify guesses


def test_pass_cost_interpolates_and_extends() -> None:
    assert pass_cost(0) == 1.0 and pass_cost(4) == PASS_COST[4]
    assert PASS_COST[2] < pass_cost(3) < PASS_COST[4]
    assert pass_cost(16) > PASS_COST[12]


def test_a_reply_that_copies_its_prompt_is_modelled_faster() -> None:
    prompt = list(range(100, 140))
    assert replay(prompt, list(range(100, 140)), Speculation()) > 2.0  # a verbatim copy
    assert replay(prompt, [1, 2, 3, 4, 5, 6, 7, 8], Speculation()) == 1.0  # nothing to draft


def test_the_default_schedule_beats_the_first_on_every_stored_task() -> None:
    replies = json.loads(data_path(*REPLIES).read_text())
    assert set(replies) == {"extract", "rag", "rewrite", "story"}
    first = replay_tasks(replies, Speculation(draft_tokens=4, min_ngram=1, adaptive=False))
    chosen = replay_tasks(replies, Speculation())
    for task in replies:
        assert chosen[task] > first[task], (task, chosen[task], first[task])
    assert chosen["story"] >= 0.99  # the no-copy target is 0.97x plain
    assert chosen["rewrite"] > 1.5


def test_a_missing_replies_file_says_how_to_record_it(tmp_path, capsys) -> None:
    from chatlab.bench.replay import main

    assert main(["--file", str(tmp_path / "none.json")]) == 2
    assert "record them first: python -m chatlab.bench.replay --record" in capsys.readouterr().err
    assert main([]) == 0 and "(default)" in capsys.readouterr().out  # the stored file
