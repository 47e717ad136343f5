"""Prefix reuse and sampled speculation on the real model (slow: loads SmolLM2).

What tests/test_prefix_reuse.py checks on the tiny Markov backend, here on the two backends
that can roll back (the paged OpenVINO graph and PyTorch): a conversation restored from the
LRU of saved prefixes answers exactly as a full prefill does; a template changed
mid-conversation is recomputed (a full prefill, or from the first differing id), never
continued. Then genai serving with its own prefix caching turned on by `--reuse-prefix`, and
prompt-lookup speculation under sampling (seeded) on SmolLM2.
"""
from __future__ import annotations

import argparse

import pytest

from chatlab.engine.lease import MIN_REUSE, PrefixCache, common_prefix
from chatlab.generate import SamplingParams, generate
from chatlab.generate.speculate import Speculation

MODEL = "smollm2-135m-instruct"
TOKENS = 24
pytestmark = pytest.mark.slow


def reply(backend, ids, n=TOKENS):
    *_, fin = generate(backend, ids, SamplingParams(max_new_tokens=n))
    return fin.token_ids


def render(backend, messages, template=None):
    from chatlab.render import resolve

    return list(resolve(backend.tokenizer, MODEL, template).render(messages).ids)


def conversation(topic):
    return [{"role": "user", "content": f"Tell me one fact about {topic}."}]


@pytest.mark.parametrize("name", ["ov_backend", "torch_backend"])
def test_lru_restores_a_conversation_and_answers_as_a_full_prefill(name, request):
    backend = request.getfixturevalue(name)
    cache = PrefixCache(backend, max_entries=2)
    a, b = conversation("the moon"), conversation("volcanoes")
    a_ids, b_ids = render(backend, a), render(backend, b)
    a_reply = reply(cache, a_ids)
    reply(cache, b_ids)  # another client: a's cache is copied out (snapshot)
    assert list(cache.saved) == [tuple(a_ids + a_reply[:-1])]
    a2 = a + [{"role": "assistant", "content": backend.tokenizer.decode(a_reply, skip_special_tokens=True)},
              {"role": "user", "content": "And one more?"}]
    a2_ids = render(backend, a2)
    shared = common_prefix(a_ids + a_reply[:-1], a2_ids)
    assert shared > len(a_ids)  # id-level rendering: turn 2 extends turn 1 and its reply
    got = reply(cache, a2_ids)  # restored from the LRU, not recomputed
    assert cache.reused == min(shared, len(a2_ids) - 1)
    assert [k[:len(b_ids)] for k in cache.saved] == [tuple(b_ids)]  # b's went out in turn
    want = reply(backend, a2_ids)  # the backend alone: a full prefill
    assert got == want


@pytest.mark.parametrize("name", ["ov_backend", "torch_backend"])
def test_a_template_changed_mid_conversation_is_recomputed(name, request):
    backend = request.getfixturevalue(name)
    cache = PrefixCache(backend)
    first = conversation("rivers")
    ids = render(backend, first)  # the model's template: SmolLM2's, with its default system prompt
    out = reply(cache, ids)
    history = first + [{"role": "assistant", "content": backend.tokenizer.decode(out, skip_special_tokens=True)},
                       {"role": "user", "content": "Why?"}]
    # Another template for turn 2 (plain ChatML: no default system prompt): the ids part after
    # a token or two, so nothing is reused and the reply is a full prefill's
    changed = render(backend, history, "chatml")
    assert common_prefix(cache.live, changed) < MIN_REUSE
    got = reply(cache, changed)
    assert cache.reused == 0 and got == reply(backend, changed)
    # A system prompt edited mid-conversation: reused exactly up to the first differing id
    cache.reset()
    rules = "You are a careful assistant for a geography class. You answer in one or two sentences, "
    ids = render(backend, [{"role": "system", "content": rules + "plainly."}] + history)
    reply(cache, ids)
    edited = render(backend, [{"role": "system", "content": rules + "and kindly."}] + history)
    cut = common_prefix(ids, edited)
    assert MIN_REUSE <= cut < len(ids) - 10
    got = reply(cache, edited)
    assert cache.reused == cut and got == reply(backend, edited)


def serve_args(*flags):
    from chatlab.cli.serve import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["serve", "--model", MODEL, "--backend", "genai", "--precision", "f32", *flags])


def test_genai_serving_turns_on_its_prefix_caching_and_turn_two_equals_a_fresh_run(smollm2_path):
    from chatlab.lab.bench.turns import timed_turn, user_turns
    from chatlab.engine import load_engine
    from chatlab.cli.serve import engine_options

    cached = load_engine(**engine_options(serve_args("--reuse-prefix")))
    fresh = load_engine(**engine_options(serve_args()))
    try:
        assert cached.backend.prefix_caching is True and fresh.backend.prefix_caching is False
        history: list[dict[str, str]] = []
        for message in user_turns(2):
            history.append({"role": "user", "content": message})
            _, text, _ = timed_turn(cached, history, TOKENS)
            history.append({"role": "assistant", "content": text})
        # turn 2 ran on the cached blocks of turn 1; the engine that caches nothing answers alike
        _, again, _ = timed_turn(fresh, history[:-1], TOKENS)
        assert history[-1]["content"] == again and again
    finally:
        cached.backend.close()
        fresh.backend.close()


def test_sampled_speculation_on_smollm2_respects_max_tokens_and_stops(ov_backend):
    """The distribution test runs on a small vocabulary (tests/test_speculate.py); here the real
    model: seeded runs are repeatable, stop strings end the reply, max_tokens bounds it."""
    from chatlab.lab.evals.retrieval import task_prompts

    ids = task_prompts(ov_backend.tokenizer, "rewrite", 1)[0]
    spec = Speculation(draft_tokens=4, ngram=3)
    stopped = 0
    for seed in (1, 2, 3):
        params = SamplingParams(max_new_tokens=40, temperature=0.3, top_p=0.9, seed=seed, stop=[" the "])
        *_, fin = generate(ov_backend, ids, params, speculate=spec)
        *_, twin = generate(ov_backend, ids, params, speculate=spec)
        assert twin.token_ids == fin.token_ids  # the seed fixes the draws, drafts and all
        assert fin.completion_tokens <= 40 and len(fin.token_ids) <= 40
        assert " the " not in fin.text
        assert fin.speculation is not None and fin.speculation["verify_passes"] > 0
        if fin.finish_reason == "stop":  # the stop string, or the template's end id
            assert fin.stop_reason == " the " or fin.stop_reason in ov_backend.eos_ids
            stopped += fin.stop_reason == " the "
        else:
            assert fin.finish_reason == "length" and fin.completion_tokens == 40
    assert stopped  # a rewrite of an English paragraph says " the " within 40 tokens
    *_, short = generate(ov_backend, ids, SamplingParams(max_new_tokens=5, temperature=0.8, seed=9),
                         speculate=spec)
    assert short.completion_tokens == 5  # an accepted draft never runs past max_tokens


def test_the_growing_chat_warms_each_engine_up_and_its_turn_one_reuses_nothing(smollm2_path, monkeypatch):
    """The TTFT table's turn 1 is a full prefill for both engines: each first ran an untimed turn
    of another conversation (so neither pays the process's first-call costs inside the table),
    and the reuse engine then forgot it, although that turn shares the template's opening."""
    from chatlab.engine import load_engine
    from chatlab.lab.bench import turns

    engines = {"reuse": load_engine(MODEL, "openvino", "int8", precision="f32", reuse_prefix=True),
               "plain": load_engine(MODEL, "openvino", "int8", precision="f32")}
    seen: list[tuple[str, str]] = []
    timed = turns.timed_turn

    def spy(engine, history, tokens):
        seen.append((next(n for n, e in engines.items() if e is engine), history[0]["content"]))
        return timed(engine, history, tokens)

    monkeypatch.setattr(turns, "timed_turn", spy)
    for _ in range(2):  # a second chat on the same engines starts from nothing as well
        seen.clear()
        chat = turns.growing_chat(engines, turns=2, tokens=4)
        assert seen[:2] == [("reuse", turns.WARM_UP), ("plain", turns.WARM_UP)]
        assert all(m != turns.WARM_UP for _, m in seen[2:])
        first, second = chat["turns"]
        assert first["reuse_reused_tokens"] == 0 and second["reuse_reused_tokens"] >= MIN_REUSE
        assert chat["replies"]["reuse"] == chat["replies"]["plain"]
