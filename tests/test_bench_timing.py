"""Decode speed counts tokens, not streamer callbacks: a streamer that delivers several tokens
per call reads the same speed as one that delivers them one by one (no real clock is read)."""
from __future__ import annotations

import pytest

from chatlab.errors import ChatlabError
from chatlab.lab.bench import engines, llamacpp
from chatlab.lab.bench.timing import decode_speed, from_stamps

TOKENS = list(range(100, 113))  # 13 tokens: the first, then 12 more


class Clock:
    """Stands in for the `time` module of an adapter: advanced by the fake runtime."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def groups(tokens: list[int], size: int) -> list[list[int]]:
    """The first token alone (it comes from the prefill), then the rest `size` at a time."""
    return [tokens[:1]] + [tokens[i:i + size] for i in range(1, len(tokens), size)]


def test_list_and_single_id_streams_read_the_same_speed():
    # 12 tokens after the first, 0.1 s per token: 10 tok/s however they were grouped
    single = [(1.0 + 0.1 * i, 1) for i in range(13)]
    lists = [(1.0, 1)] + [(1.0 + 0.1 * (i + 3), 3) for i in range(0, 12, 3)]
    assert from_stamps(0.5, single, TOKENS).decode_tok_s == pytest.approx(10.0)
    assert from_stamps(0.5, lists, TOKENS).decode_tok_s == pytest.approx(10.0)
    assert from_stamps(0.5, lists, TOKENS).ttft_s == pytest.approx(0.5)
    # counting callbacks would have read the list stream at a third of its speed
    assert (len(lists) - 1) / (lists[-1][0] - lists[0][0]) == pytest.approx(10.0 / 3)


def test_edge_cases_and_a_miscounted_stream():
    assert decode_speed([(1.0, 1)]) == 0.0
    assert decode_speed([(1.0, 4)]) == 0.0  # all at once: no time to divide by
    assert from_stamps(0.0, [(0.2, 1)], [7]).ttft_s == pytest.approx(0.2)
    with pytest.raises(ChatlabError, match="account for 2 tokens but 3"):
        from_stamps(0.0, [(0.1, 1), (0.2, 1)], [1, 2, 3])
    with pytest.raises(ChatlabError, match="no new token"):
        from_stamps(0.0, [], [])


class FakePipe:
    """genai's LLMPipeline.generate as far as the bench's streamer sees it: writes `size` ids
    per call (a list when several, as genai's prompt lookup does), 0.1 s per token."""

    def __init__(self, clock: Clock, size: int) -> None:
        self.clock, self.size = clock, size

    def generate(self, inputs: object, config: object, streamer: object) -> None:
        self.clock.now += 0.5  # the prefill
        for group in groups(TOKENS, self.size):
            self.clock.now += 0.1 * len(group) if group[0] != TOKENS[0] else 0.0
            streamer.write(group if self.size > 1 else group[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [1, 3, 4])
def test_genai_adapter_counts_the_tokens_of_each_write(monkeypatch, size):
    pytest.importorskip("openvino_genai")
    clock = Clock()
    monkeypatch.setattr(engines, "time", clock)
    engine = engines.GenAI("smollm2-135m-instruct")
    engine.pipe = FakePipe(clock, size)
    timing = engine.run([1, 2, 3], len(TOKENS))
    assert timing.tokens == TOKENS
    assert timing.decode_tok_s == pytest.approx(10.0) and timing.ttft_s == pytest.approx(0.5)


@pytest.mark.parametrize("size", [1, 3])
def test_transformers_streamer_counts_the_tokens_of_each_put(monkeypatch, size):
    torch = pytest.importorskip("torch")
    clock = Clock()
    monkeypatch.setattr(engines, "time", clock)
    streamer = engines.StampStreamer()
    streamer.put(torch.tensor([[1, 2, 3]]))  # the prompt, streamed first: not a new token
    for group in groups(TOKENS, size):
        clock.now += 0.1 * len(group)
        # plain decoding puts a 1-d tensor of one id; assisted generation a row of several
        streamer.put(torch.tensor(group) if size == 1 else torch.tensor([group]))
    timing = from_stamps(0.0, streamer.stamps, TOKENS)
    assert timing.decode_tok_s == pytest.approx(10.0) and timing.ttft_s == pytest.approx(0.1)


class FakeLlama:
    """llama-cpp-python's Llama as LlamaCpp.run uses it: reset, then one token per yield."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def reset(self) -> None:
        pass

    def generate(self, ids: list[int], **kwargs: object):
        for token in TOKENS + [2, 2]:
            self.clock.now += 0.1
            yield token


def test_llamacpp_adapter_stamps_one_token_per_yield(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(llamacpp, "time", clock)
    engine = llamacpp.LlamaCpp("smollm2-135m-instruct")
    engine.llm, engine.eos = FakeLlama(clock), 2
    timing = engine.run([1, 2, 3], len(TOKENS))
    assert timing.tokens == TOKENS and timing.decode_tok_s == pytest.approx(10.0)
    stopped = engine.run([1, 2, 3], 50, stop_at_eos=True)
    assert stopped.tokens == TOKENS + [2] and stopped.decode_tok_s == pytest.approx(10.0)
