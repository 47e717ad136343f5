"""Notebook 03's exercises: the KV cache (on the notebook's `kv`, or one loaded), top-p, a stop matcher."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from chatlab._thirdparty import Graded
from chatlab.generate.sampling import top_p_filter
from chatlab.generate.assemble import StopMatcher
from chatlab.lab.exercises import Case, Exercise, register, short
from chatlab.lab.explicit_kv import ExplicitKV, load as load_stateless
from chatlab.models import default_model, load_tokenizer
from chatlab.render import resolve

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
PROMPTS = [FRANCE, [{"role": "user", "content": "Tell me a story about a robot."}],
           [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]]


@lru_cache(maxsize=1)
def _default_kv() -> ExplicitKV:
    return load_stateless(default_model())


@lru_cache(maxsize=1)
def _prompt_ids() -> tuple[tuple[int, ...], ...]:
    name = default_model()
    res = resolve(load_tokenizer(name), name)
    return tuple(tuple(res.render(chat).ids) for chat in PROMPTS)


def _kv_and_prompts(kv: ExplicitKV | None = None) -> tuple[ExplicitKV, list[list[int]]]:
    return (kv if kv is not None else _default_kv()), [list(ids) for ids in _prompt_ids()]


def _cache_bytes_cases(kv: ExplicitKV | None = None) -> list[Case]:
    kv, prompts = _kv_and_prompts(kv)
    cases = []
    for ids in prompts[:2]:
        _, cache = kv.forward(ids, kv.empty_cache())
        _, heads, positions, head_dim = cache["past_key_values.0.key"].shape
        measured = sum(a.nbytes for a in cache.values())   # what the arrays really hold
        # the arrays' own bytes per number: f32 as exported, f16 from some OpenVINO builds
        size = cache["past_key_values.0.key"].dtype.itemsize
        cases.append(Case((kv.layers, heads, positions, head_dim, size),
                          f"a {positions}-token prompt, {size} bytes per number", expected=measured))
    cases.append(Case((kv.layers, 3, 1000, 64, 2), "1,000 positions at 2 bytes (an f16 cache)",
                      expected=kv.layers * 2 * 3 * 1000 * 64 * 2))
    return cases


register(Exercise("nb03.cache_bytes", _cache_bytes_cases))


def _fourth_token_cases(kv: ExplicitKV | None = None) -> list[Case]:
    kv, prompts = _kv_and_prompts(kv)
    return [Case((kv, ids), f"prompt {i + 1} ({len(ids)} tokens)") for i, ids in enumerate(prompts)]


register(Exercise("nb03.fourth_token", _fourth_token_cases,
                  reference=lambda kv, prompt: kv.greedy(prompt, 4, stop_ids=[])[3],
                  same=lambda got, expected: int(got) == int(expected)))


def _top_p_reference(probs: np.ndarray, p: float) -> int:
    return len(top_p_filter(np.arange(len(probs)), probs, p)[0])


def _top_p_cases() -> list[Case]:
    flat = np.full(10, 0.1)
    steep = np.array([0.7, 0.2, 0.05, 0.03, 0.02])
    return [Case((steep, 0.5), "the best token alone is enough"),
            Case((steep, 0.85), "0.7 is short of 0.85, 0.7 + 0.2 reaches it"),
            Case((steep, 0.95), "three tokens"),
            Case((flat, 0.35), "a flat distribution"),
            Case((steep, 1.0), "p = 1 keeps everything")]


register(Exercise("nb03.top_p", _top_p_cases, reference=_top_p_reference,
                  same=lambda got, expected: int(got) == expected))


def _forward_cases(kv: ExplicitKV | None = None) -> list[Case]:
    kv, prompts = _kv_and_prompts(kv)
    france = prompts[0]
    logits, cache = kv.forward(france, kv.empty_cache())
    first = int(np.argmax(logits))
    _, cache2 = kv.forward([first], cache)
    return [Case((kv, france, kv.empty_cache()), "prefill: the prompt with an empty past"),
            Case((kv, [first], cache), "decode: one token after the prompt"),
            Case((kv, [3575, 282], cache2), "two tokens at once after a longer past")]


def _same_forward(got: Graded, expected: Graded) -> bool:
    logits, cache = got
    want_logits, want_cache = expected
    if np.shape(logits) != np.shape(want_logits) or set(cache) != set(want_cache):
        return False
    # another order of additions moves the last decimals, never the shapes or the best token
    return (int(np.argmax(logits)) == int(np.argmax(want_logits))
            and np.allclose(logits, want_logits, atol=1e-3)
            and all(np.shape(cache[k]) == np.shape(want_cache[k]) and np.allclose(cache[k], want_cache[k], atol=1e-3)
                    for k in want_cache))


def _show_forward(value: Graded) -> str:
    if isinstance(value, dict) and value:
        first = next(iter(value))
        return f"<cache of {len(value)} arrays, {first} {tuple(np.shape(value[first]))}>"
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return f"(logits {tuple(np.shape(value[0]))} best {int(np.argmax(value[0]))}, {_show_forward(value[1])})"
    return short(value)


register(Exercise("nb03.kv_forward", _forward_cases, reference=lambda kv, ids, past: kv.forward(ids, past),
                  same=_same_forward, show=_show_forward))


def stop_stream_reference(deltas: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    """What a stream shows: an entry per delta fed until a stop matches; without one, the flushed tail."""
    matcher, shown = StopMatcher(stops), []
    for delta in deltas:
        r = matcher.feed(delta)
        shown.append(r.text)
        if r.stop is not None:
            return shown, r.stop
    shown.append(matcher.flush())
    return shown, None


def _stop_cases() -> list[Case]:
    return [
        Case((["Thought: hi", "\nObs", "ervation: 31°C"], ["Observation:"]), "the stop split over two deltas"),
        Case((["Final Answer: Obsidian", " is a rock.\nObs"], ["Observation:"]),
             "'Obs' that becomes 'Obsidian', and a tail held to the end"),
        Case((["Hello", " world"], ["STOP"]), "no stop at all"),
        Case((["1. Ban", "ana\n", "2.", " Apple"], ["a\n2. "]), "a stop across three deltas"),
        Case((["ab", "c<|im_end|>after"], ["<|", "<|im_end|>"]), "two stops at one place: the longest wins"),
        Case((["ab", "c<|", "im_end|>"], ["<|im_end|>", "<|"]), "a short stop that completes first ends it"),
        Case((["xx", "yy"], ["xyz"]), "a held 'x' released when the next delta shows it is not a stop"),
        Case((["END"], ["END"]), "the stop at the very start: nothing is shown"),
        Case((["a", "b"], []), "no stop strings: everything streams"),
    ]


register(Exercise("nb03.stop_matcher", _stop_cases, reference=stop_stream_reference))
