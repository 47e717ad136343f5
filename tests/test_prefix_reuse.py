"""Multi-turn prefix reuse (chatlab.engine.lease) on the tiny Markov backend: the next turn
feeds only its new ids, a prompt that stops agreeing is recomputed from where it differs, and
alternating conversations come back from the bounded LRU."""
from __future__ import annotations

import numpy as np
import pytest

from chatlab.engine.lease import MIN_REUSE, PrefixCache, common_prefix
from chatlab.errors import ChatlabError
from chatlab.generate import SamplingParams, generate
from markov_backend import MarkovBackend, MarkovChain


def backend() -> MarkovBackend:
    rng = np.random.default_rng(0)
    return MarkovBackend(rng.normal(0, 3, (4, 4)), rng.normal(0, 3, 4))


def reply(target, prompt, n=10):
    *_, fin = generate(target, prompt, SamplingParams(max_new_tokens=n))
    return fin.token_ids


class Feeds(MarkovBackend):
    """Records how many ids each call fed."""

    def __init__(self, *a):
        super().__init__(*a)
        self.fed: list[int] = []

    def prefill(self, ids):
        self.fed.append(len(ids))
        return super().prefill(ids)

    def extend(self, ids, keep=1):
        self.fed.append(len(ids))
        return super().extend(ids, keep)


def test_next_turn_feeds_only_new_ids_and_answers_the_same():
    b = backend()
    fb = Feeds(b.table, b.parity)
    cache = PrefixCache(fb)
    turn1 = [0, 1, 2, 3] * 6
    out1 = reply(cache, turn1)
    turn2 = turn1 + out1 + [3, 2, 1]  # the client resends everything, plus a new message
    fb.fed.clear()
    out2 = reply(cache, turn2)
    # all of turn 1 and its reply but the reply's last token (sampled, never fed) were cached
    assert cache.reused == len(turn1) + len(out1) - 1
    assert fb.fed[0] == len(turn2) - cache.reused
    assert out2 == reply(backend(), turn2)  # the same reply as a full prefill


def test_a_prompt_that_differs_is_recomputed_from_the_difference():
    cache = PrefixCache(backend())
    first = [0, 1, 2, 3] * 8
    reply(cache, first)
    changed = first[:20] + [3, 3] + first[22:]  # e.g. the template changed mid-conversation
    out = reply(cache, changed)
    assert cache.reused == 20 and cache.backend.ids[:len(changed)] == changed
    assert out == reply(backend(), changed)
    other = [3, 2, 1, 0] * 8  # nothing in common: a full prefill
    assert reply(cache, other) == reply(backend(), other) and cache.reused == 0


def test_identical_prompt_refeeds_its_last_token():
    cache = PrefixCache(backend())
    p = [1, 2, 3, 0] * 6
    a = reply(cache, p)
    assert reply(cache, p) == a and cache.reused == len(p) - 1


def test_alternating_conversations_come_back_from_the_lru():
    cache = PrefixCache(backend(), max_entries=1)
    a, b = [0, 1, 2, 3] * 6, [3, 2, 1, 0] * 6
    out_a = reply(cache, a)
    reply(cache, b)  # a's cache is saved, b's is live
    assert list(cache.saved) == [tuple(a + out_a[:-1])]
    a2 = a + out_a + [1, 1]
    assert reply(cache, a2) == reply(backend(), a2)
    assert cache.reused == len(a) + len(out_a) - 1  # restored, not recomputed
    c = [2, 2, 0, 0] * 6
    reply(cache, c)
    assert len(cache.saved) == 1  # bounded: the LRU keeps max_entries sequences


def test_forget_drops_the_live_sequence_and_the_saved_copies():
    """reset() keeps the LRU (other conversations stay reusable); forget() starts from nothing."""
    cache = PrefixCache(backend(), max_entries=2)
    a, b = [0, 1, 2, 3] * 6, [3, 2, 1, 0] * 6
    out_a = reply(cache, a)
    reply(cache, b)  # a saved, b live
    cache.reset()
    reply(cache, a + out_a)
    assert cache.reused == len(a) + len(out_a) - 1  # a came back from the LRU after reset()
    cache.forget()
    assert not cache.saved and not cache.live
    assert reply(cache, b) == reply(backend(), b) and cache.reused == 0


def test_conversations_sharing_a_system_prompt_come_back_from_the_lru():
    """Two clients under one system prompt share its ids; the one cut back to them is saved."""
    cache = PrefixCache(backend(), max_entries=2)
    system = [0, 1, 2, 3] * 5  # 20 shared ids, more than MIN_REUSE
    a, b = system + [1, 1, 2] * 4, system + [3, 0, 0] * 4
    out_a = reply(cache, a)
    reply(cache, b)
    assert cache.reused == len(system) and list(cache.saved) == [tuple(a + out_a[:-1])]
    a2 = a + out_a + [2, 1]
    assert reply(cache, a2) == reply(backend(), a2)
    assert cache.reused == len(a) + len(out_a) - 1  # restored, not cut back to the system prompt


def test_lru_is_bounded_in_bytes():
    cache = PrefixCache(backend(), max_entries=8, max_bytes=8 * 40)
    for start in range(4):
        reply(cache, [start, (start + 1) % 4] * 12)
    assert sum(cache.sizes.values()) <= 8 * 40 and len(cache.saved) == 1


def test_short_prompts_and_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    cache = PrefixCache(backend())
    short = [0, 1] * (MIN_REUSE // 4)
    reply(cache, short)
    reply(cache, short + [2])
    assert cache.reused == 0  # under MIN_REUSE shared ids a full prefill is as cheap


def test_backend_without_rollback_is_refused():
    class Plain(MarkovChain):
        name = "plain"

    with pytest.raises(ChatlabError, match="prefix reuse needs.*plain cannot"):
        PrefixCache(Plain(np.zeros((2, 2))))
