"""Prompt-lookup speculation on a tiny backend whose logits the test controls.

The backend is a Markov chain over a few tokens: the next-token logits depend on the last token
and the position's parity, so drafts copied from the prompt are sometimes right and sometimes
wrong. That is enough to check the three promises: greedy output is plain greedy's; sampled
output has plain sampling's distribution (chi-square over every 4-token reply); every logits
processor sees exactly the tokens that are emitted.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from chatlab.errors import ChatlabError
from chatlab.generate import SamplingParams, generate
from chatlab.generate.sampling import Sampler, top_k_probs
from chatlab.generate.speculate import (FIRST_DRAFT, FIRST_PAUSE, MISSES, PromptLookup, Speculation,
                                       prepare)
from markov_backend import MarkovBackend, MarkovChain


def run(backend, prompt, spec=None, processor=None, **kw):
    *_, fin = generate(backend, prompt, SamplingParams(**kw), processor, speculate=spec)
    return fin


def random_backend(rng, vocab=4, scale=3.0) -> MarkovBackend:
    return MarkovBackend(rng.normal(0, scale, (vocab, vocab)), rng.normal(0, scale, vocab))


PROMPT = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


def test_greedy_is_token_identical_and_uses_fewer_passes():
    rng = np.random.default_rng(0)
    total_plain = total_fast = accepted = 0
    for _ in range(40):
        b = random_backend(rng)
        prompt = list(rng.integers(0, 4, 12))
        plain = run(b, prompt, max_new_tokens=30)
        total_plain += b.passes
        b.passes = 0
        fast = run(b, prompt, Speculation(draft_tokens=5, ngram=3), max_new_tokens=30)
        total_fast += b.passes
        assert fast.token_ids == plain.token_ids and fast.text == plain.text
        assert len(b.ids) <= len(prompt) + 30  # never cached past the last token's row
        accepted += fast.speculation["accepted_tokens"]
    assert accepted > 0 and total_fast < total_plain


class NoRepeat:
    """A stateful 'grammar': the token just emitted is forbidden next. Records what it saw."""

    def __init__(self) -> None:
        self.accepted: list[int] = []
        self.masked = 0

    def mask(self, logits):
        self.masked += 1
        if self.accepted:
            logits = logits.copy()
            logits[self.accepted[-1]] = -np.inf
        return logits

    def accept(self, token):
        self.accepted.append(token)


def test_processors_see_only_emitted_tokens():
    rng = np.random.default_rng(1)
    for _ in range(20):
        b = random_backend(rng)
        runs = []
        for spec in (None, Speculation(draft_tokens=4, ngram=2)):
            proc = NoRepeat()
            fin = run(b, PROMPT, spec, proc, max_new_tokens=25, repetition_penalty=1.4,
                      presence_penalty=0.5, frequency_penalty=0.3,
                      logit_bias={2: 1.5}, logprobs=True, top_logprobs=2)
            assert proc.accepted == fin.token_ids and proc.masked == len(fin.token_ids)
            runs.append(fin)
        assert runs[0].token_ids == runs[1].token_ids


def test_stop_string_and_max_tokens_cut_like_plain():
    rng = np.random.default_rng(2)
    for _ in range(20):
        b = random_backend(rng)
        for kw in ({"stop": ["ab"]}, {"stop": ["c"]}, {"stop_ids": [3]}, {"max_new_tokens": 3}):
            kw = {"max_new_tokens": 20, **kw}
            plain = list(generate(b, PROMPT, SamplingParams(**kw)))
            fast = list(generate(b, PROMPT, SamplingParams(**kw), speculate=Speculation(draft_tokens=8)))
            assert [getattr(e, "text") for e in fast] == [getattr(e, "text") for e in plain]
            assert fast[-1].finish_reason == plain[-1].finish_reason
            assert fast[-1].token_ids == plain[-1].token_ids


def test_a_halt_on_the_last_allowed_token_finishes_like_plain():
    """should_stop firing on the very token that reaches max_new_tokens ends both loops the same
    way (the halt is checked before the length)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        b = random_backend(rng)
        finals = []
        for spec in (None, Speculation(draft_tokens=8)):
            calls = itertools.count(1)
            *_, fin = generate(b, PROMPT, SamplingParams(max_new_tokens=6, ignore_eos=True),
                               should_stop=lambda: next(calls) >= 6, speculate=spec)
            finals.append((fin.finish_reason, fin.token_ids))
        assert finals[0] == finals[1] and len(finals[0][1]) == 6 and finals[0][0] != "length"


def exact_distribution(b: MarkovBackend, prompt, n: int, temperature: float, top_k: int):
    """P(reply) for every n-token reply under plain sampling, from the chain itself."""
    out = {}
    for reply in itertools.product(range(b.vocab_size), repeat=n):
        ids, p = list(prompt), 1.0
        for t in reply:
            row = b.table[ids[-1]] + (len(ids) % 2) * b.parity
            cand, probs = top_k_probs(row, top_k or b.vocab_size, temperature)
            where = np.flatnonzero(cand == t)
            p *= float(probs[where[0]]) if where.size else 0.0
            ids.append(t)
        out[reply] = p
    return out


def chi_square_rejects(counts: Counter, exact: dict, draws: int) -> tuple[float, float]:
    """(statistic, critical value at alpha = 0.001) over outcomes with expected count >= 5;
    the critical value by the Wilson-Hilferty approximation of the chi-square quantile."""
    cells = [k for k, p in exact.items() if p * draws >= 5]
    stat = sum((counts.get(k, 0) - exact[k] * draws) ** 2 / (exact[k] * draws) for k in cells)
    rest = draws - sum(counts.get(k, 0) for k in cells)
    rest_p = 1 - sum(exact[k] for k in cells)
    if rest_p * draws >= 5:
        stat += (rest - rest_p * draws) ** 2 / (rest_p * draws)
        cells.append(None)
    df = len(cells) - 1
    z = 3.09  # the normal's 0.999 quantile
    critical = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    return stat, critical


def sample_replies(b, spec, draws, **kw):
    counts: Counter = Counter()
    for seed in range(draws):
        counts[tuple(run(b, PROMPT, spec, seed=seed, **kw).token_ids)] += 1
    return counts


# The chain copies: after token t it likes t+1 (as the prompt 0 1 2 3 0 1 does), so drafts are
# accepted often, and rejected often enough that the residual distribution matters.
COPYING = np.log(np.array([[0.1, 0.6, 0.2, 0.1], [0.15, 0.1, 0.55, 0.2],
                           [0.2, 0.1, 0.1, 0.6], [0.5, 0.2, 0.15, 0.15]]))


@pytest.mark.parametrize("kw", [{"temperature": 1.0}, {"temperature": 0.7, "top_k": 3}])
def test_sampling_distribution_is_unchanged(kw):
    b = MarkovBackend(COPYING, np.array([0.3, -0.2, 0.0, 0.1]))
    exact = exact_distribution(b, PROMPT, 4, kw["temperature"], kw.get("top_k", 0))
    draws = 6000
    spec = Speculation(draft_tokens=3, ngram=2, adaptive=False)
    counts = sample_replies(b, spec, draws, max_new_tokens=4, **kw)
    stat, critical = chi_square_rejects(counts, exact, draws)
    assert stat < critical, (stat, critical)


def test_the_chi_square_check_catches_a_biased_rule(monkeypatch):
    """The same check fails an accept-every-draft-with-p(x)>0.3 rule: it has the power to see
    a wrong acceptance rule, so its passing above means something."""
    real = Sampler.check_draft

    def biased(self, logits, draft):
        token, ok = real(self, logits, draft)
        if not ok and self.params.temperature and np.exp(logits[draft] - logits.max()) > 0.3:
            return draft, True
        return token, ok

    monkeypatch.setattr(Sampler, "check_draft", biased)
    b = MarkovBackend(COPYING, np.array([0.3, -0.2, 0.0, 0.1]))
    exact = exact_distribution(b, PROMPT, 4, 1.0, 0)
    counts = sample_replies(b, Speculation(draft_tokens=3, ngram=2, adaptive=False), 3000,
                            max_new_tokens=4, temperature=1.0)
    stat, critical = chi_square_rejects(counts, exact, 3000)
    assert stat > critical


def test_lookup_prefers_the_longest_and_latest_match():
    look = PromptLookup(Speculation(draft_tokens=3, ngram=3, adaptive=False), [5, 6, 7, 1, 6, 7, 2, 9, 9])
    for t in (6, 7):
        look.add(t)
    assert look.draft(10) == [2, 9, 9]  # "6 7" last seen before "2 9 9", not before "1"
    look.add(1)  # "6 7 1" occurred once: the 3-gram wins
    assert look.draft(10) == [6, 7, 2]
    assert look.draft(2) == [6, 7]  # capped by the loop's token budget
    assert PromptLookup(Speculation(), [1, 2, 3]).draft(4) == []  # nothing repeats


def test_each_guess_is_sized_by_the_last_one():
    """Adaptive: the first guess is 2 tokens; a guess kept whole doubles the next (up to k), one
    that kept a tokens makes the next a + 1 (never below 2)."""
    look = PromptLookup(Speculation(draft_tokens=8), list(range(20)) + [0, 1])
    assert len(look.draft(50)) == FIRST_DRAFT == 2
    sizes = []
    for drafted, accepted in [(2, 2), (4, 4), (8, 8), (8, 3), (4, 0), (2, 1)]:
        look.result(drafted, accepted)
        sizes.append(look.size)
    assert sizes == [4, 8, 8, 4, 2, 2]
    assert len(look.draft(50)) == 2 and len(look.draft(1)) == 1  # the loop's budget still caps it
    fixed = PromptLookup(Speculation(draft_tokens=5, adaptive=False), list(range(20)) + [0, 1])
    fixed.result(5, 0)
    assert len(fixed.draft(50)) == 5  # not adaptive: always k


def test_single_token_matches_need_asking_for():
    """min_ngram is 2 by default: a repeated single token (" the") drafts nothing; ngram=1 or
    min_ngram=1 asks for single-token lookups."""
    prompt = [7, 1, 2, 3]
    assert PromptLookup(Speculation(), prompt + [7]).draft(4) == []
    assert PromptLookup(Speculation(min_ngram=1), prompt + [7]).draft(4) == [1, 2]
    assert PromptLookup(Speculation(ngram=1), prompt + [7]).draft(4) == [1, 2]
    assert PromptLookup(Speculation(), prompt + [7, 1]).draft(4) == [2, 3]


def test_lookup_pauses_after_misses_and_resumes():
    look = PromptLookup(Speculation(), [1, 2, 1, 2])
    for _ in range(MISSES):
        assert look.draft(4)
        look.result(2, 0)
    assert look.draft(4) == []  # paused
    for _ in range(FIRST_PAUSE):
        look.add(1)
    assert look.draft(4)  # probing again
    look.result(2, 1)
    assert look.misses == 0


class NoCopy(MarkovBackend):
    """Each position's token is drawn in advance at random from 50: nothing in the history
    predicts it, the way a free story copies nothing from its prompt."""

    def __init__(self) -> None:
        super().__init__(np.zeros((50, 50)))
        self.script = np.random.default_rng(3).integers(0, 50, 1000)

    def _row(self):
        row = np.zeros(50, np.float32)
        row[self.script[len(self.ids)]] = 10.0
        return row


def test_no_copy_text_mostly_decodes_plainly():
    """Drafts from a history that predicts nothing: adaptive drafting gives up quickly."""
    b = NoCopy()
    prompt = list(range(50)) * 2  # every token has an earlier match: a draft is always found
    adaptive = run(b, prompt, Speculation(ngram=1), max_new_tokens=300)
    eager = run(b, prompt, Speculation(ngram=1, adaptive=False), max_new_tokens=300)
    assert adaptive.token_ids == eager.token_ids == [int(t) for t in b.script[100:400]]
    assert adaptive.speculation["verify_passes"] < eager.speculation["verify_passes"] / 3


@pytest.mark.parametrize("kw,match", [
    ({"draft_tokens": 0}, "draft_tokens=0.*1 to 16"), ({"draft_tokens": 17}, "1 to 16"),
    ({"draft_tokens": True}, "draft_tokens"), ({"ngram": 0}, "ngram=0.*1 to 8"),
    ({"ngram": 9}, "1 to 8"), ({"ngram": 2, "min_ngram": 3}, "min_ngram=3.*1 to ngram=2"),
    ({"method": "medusa"}, "unknown.*prompt-lookup")])
def test_bad_speculation_settings(kw, match):
    with pytest.raises(ChatlabError, match=match):
        Speculation(**kw)


def test_backend_without_rollback_is_refused():
    class Plain(MarkovChain):
        name = "plain"

    b = Plain(COPYING)
    with pytest.raises(ChatlabError, match="plain cannot.*--backend torch.*paged"):
        list(generate(b, PROMPT, SamplingParams(max_new_tokens=4), speculate=Speculation()))


def test_fixed_width_guesses_are_as_long_as_the_match_and_still_pause():
    """A backend that pads every verify pass to 1 + k tokens (OpenVINO's verify graph) pays the
    same for any guess up to k: the guess is not sized down after a miss, but drafting still
    pauses after MISSES empty ones."""
    look = PromptLookup(Speculation(draft_tokens=3), list(range(20)) + [0, 1], fixed_width=True)
    assert len(look.draft(50)) == 3  # not FIRST_DRAFT
    look.result(3, 1)
    assert len(look.draft(50)) == 3 and len(look.draft(2)) == 2  # the loop's budget still caps it
    for _ in range(MISSES):
        look.result(3, 0)
    assert look.draft(50) == []  # paused


class Padded(MarkovBackend):
    """A Markov backend that records the verify width the loop asked it to prepare."""

    widths: list[int]

    def prepare_verify(self, width):
        self.widths = [*getattr(self, "widths", []), width]


def test_the_loop_prepares_the_backend_for_its_guesses():
    rng = np.random.default_rng(5)
    backend = Padded(rng.normal(0, 3.0, (4, 4)), rng.normal(0, 3.0, 4))
    plain = run(backend, PROMPT, max_new_tokens=24)
    fast = run(backend, PROMPT, Speculation(draft_tokens=5), max_new_tokens=24)
    assert backend.widths == [6] and fast.token_ids == plain.token_ids
    assert prepare(backend, Speculation(draft_tokens=2)) is True and backend.widths[-1] == 3
    assert prepare(MarkovBackend(np.zeros((4, 4))), Speculation()) is False  # nothing to set up


def test_a_lease_can_roll_back_only_when_its_backend_can():
    """The engine's lease shows the loop the capability its backend has (a protocol checked
    with isinstance), so speculation through a lease is refused as on the backend itself."""
    from chatlab.engine.lease import ModelGuard
    from chatlab.protocols import RollbackBackend

    assert isinstance(ModelGuard(MarkovBackend(COPYING)).acquire(), RollbackBackend)
    plain = ModelGuard(MarkovChain(COPYING)).acquire()
    assert not isinstance(plain, RollbackBackend)
    with pytest.raises(ChatlabError, match="markov cannot drop rejected tokens"):
        list(generate(plain, PROMPT, SamplingParams(max_new_tokens=4), speculate=Speculation()))


def test_the_loop_source_prepares_a_padded_backend_once_at_load():
    """An engine's source checks and prepares the backend when it is built (not in the first
    request), and its replies through the lease keep the padded verify passes' sizing."""
    from chatlab.engine.engine import LoopSource

    rng = np.random.default_rng(5)
    backend = Padded(rng.normal(0, 3.0, (4, 4)), rng.normal(0, 3.0, 4))
    source = LoopSource(backend, Speculation(draft_tokens=5))
    assert backend.widths == [6] and source.padded is True
    events = list(source.events(tuple(PROMPT), SamplingParams(max_new_tokens=24, temperature=0), None, None))
    assert backend.widths == [6]  # not prepared again per request
    direct = run(Padded(backend.table, backend.parity), PROMPT, Speculation(draft_tokens=5),
                 max_new_tokens=24, temperature=0)
    assert events[-1].token_ids == direct.token_ids and events[-1].speculation == direct.speculation
    with pytest.raises(ChatlabError, match="plain cannot drop rejected tokens"):
        class Plain(MarkovChain):
            name = "plain"

        LoopSource(Plain(COPYING), Speculation())
