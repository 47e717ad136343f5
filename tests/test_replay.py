"""chatlab.lab.bench.replay models speculation from recorded greedy replies. Its passes must be the
real loop's passes (else the model says nothing about the loop), and the default draft schedule
must beat the first one on the stored replies of every bench task without slowing the no-copy
story (the choice documented in chatlab.generate.speculate)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from chatlab.lab.bench.replay import (PASS_COST, REPLIES, oracle, oracle_tasks, pass_cost, replay, replay_passes,
                                  replay_tasks, until_end)
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


class Padding(Logged):
    """A Logged backend that pads its verify passes (declares prepare_verify, as OpenVINO does)."""

    def prepare_verify(self, width):
        pass


@pytest.mark.parametrize("spec, fixed", [(Speculation(), False), (Speculation(), True),
                                         (Speculation(draft_tokens=3, ngram=2, min_ngram=1), False),
                                         (Speculation(draft_tokens=4, adaptive=False), False)],
                         ids=["sized", "padded", "k3n2", "fixed"])
def test_replayed_passes_are_the_loops_passes(spec: Speculation, fixed: bool) -> None:
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(30):
        b = (Padding if fixed else Logged)(rng.normal(0, 3, (4, 4)), rng.normal(0, 3, 4))
        prompt = [int(t) for t in rng.integers(0, 4, 12)]
        *_, plain = generate(b, prompt, SamplingParams(max_new_tokens=40))
        b.log = []
        *_, fast = generate(b, prompt, SamplingParams(max_new_tokens=40), speculate=spec)
        assert fast.token_ids == plain.token_ids
        assert replay_passes(prompt, list(plain.token_ids), spec, fixed) == b.log
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


def test_the_default_schedules_beat_the_first_on_every_stored_task() -> None:
    """Both defaults (padded to 1+3 on OpenVINO, sized up to 3 on torch) beat the first schedule
    on every task, whole replies or cut at the end token, and keep the no-copy story at plain's
    speed (the issue's target there is 0.97x)."""
    replies = json.loads(data_path(*REPLIES).read_text())
    assert set(replies) == {"extract", "rag", "rewrite", "story"}
    for stop_at_end in (True, False):
        first = replay_tasks(replies, Speculation(draft_tokens=4, min_ngram=1, adaptive=False),
                             stop_at_end=stop_at_end)
        for fixed in (True, False):
            chosen = replay_tasks(replies, Speculation(), fixed_width=fixed, stop_at_end=stop_at_end)
            for task in replies:
                assert chosen[task] > first[task], (task, fixed, chosen[task], first[task])
            assert chosen["story"] >= 0.98 and chosen["rewrite"] > 1.5


def test_replies_are_cut_at_their_end_token() -> None:
    assert until_end([5, 6, 2, 7, 8]) == [5, 6, 2] and until_end([5, 6]) == [5, 6]
    prompt = list(range(100, 140))
    # a reply that copies its prompt, ends, then runs on with text that copies nothing
    tasks = {"t": [{"prompt": prompt, "reply": list(range(100, 120)) + [2] + list(range(300, 340))}]}
    cut, whole = (replay_tasks(tasks, Speculation(), stop_at_end=s)["t"] for s in (True, False))
    assert cut > 2.0 > 1.5 > whole  # the run-on tail would hide that the reply itself copied


def test_a_padded_pass_costs_its_full_width() -> None:
    prompt = list(range(100, 140))
    reply = [100, 101, 7, 8, 9]  # one guess of 2 kept... then nothing matches
    sized = replay(prompt, reply, Speculation(draft_tokens=8))
    padded = replay(prompt, reply, Speculation(draft_tokens=8), fixed_width=True)
    assert padded < sized  # the padded graph pays for 1+8 however short the guess


def test_a_missing_replies_file_says_how_to_record_it(tmp_path, capsys) -> None:
    from chatlab.cli import main

    assert main(["bench", "replay", "--file", str(tmp_path / "none.json")]) == 2
    assert "record them first: chatlab bench replay --record" in capsys.readouterr().err
    assert main(["bench", "replay"]) == 0 and "(OpenVINO)" in capsys.readouterr().out  # the stored file


def test_the_oracle_bounds_every_schedule() -> None:
    """No padded lookup policy beats the oracle on any stored task, and on a reply that repeats
    its prompt verbatim the oracle keeps a full guess every pass (4 tokens: 10 passes for 39)."""
    replies = json.loads(data_path(*REPLIES).read_text())
    bound = oracle_tasks(replies)
    for spec in (Speculation(), Speculation(min_ngram=1), Speculation(draft_tokens=3, ngram=6)):
        for task, speed in replay_tasks(replies, spec, fixed_width=True).items():
            assert speed <= bound[task], (task, spec)
    prompt = list(range(100, 140))
    assert oracle(prompt, list(range(100, 140))) == pytest.approx(39 / (10 * pass_cost(3)))
    assert oracle(prompt, [1, 2, 3, 4]) == 1.0  # nothing ever matches: plain steps
