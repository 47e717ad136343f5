"""Time to first token over a growing chat, with and without prefix reuse, interleaved turn by
turn: a client resends the whole chat, which reuse (chatlab.engine.lease) prefills only in part."""
from __future__ import annotations

import json
import time
from typing import Mapping, Sequence, Union

from chatlab._thirdparty import Jsonable
from chatlab.backends.export import export_model
from chatlab.backends.precision import ov_config
from chatlab.engine import ChatEngine, load_engine, parse_request
from chatlab.errors import ChatlabError
from chatlab.lab.evals.retrieval import questions_with_passages


def user_turns(n: int) -> list[str]:
    """The first `n` questions of notebook 08's set, each with its passage, as user messages."""
    every = questions_with_passages()
    if not 1 <= n <= len(every):
        raise ChatlabError(f"the question set has {len(every)} questions: ask for 1 to "
                           f"{len(every)} turns from question 0, not {n}")
    return [f"Passage: {passage}\n\nQuestion: {question}" for question, passage in every[:n]]


class GenaiChatMode:
    """openvino-genai's own chat mode (`start_chat()`, one user message per `generate`), which keeps
    the history and reuses it by prefix caching: the multi-turn target."""

    def __init__(self, model: str, precision: str = "f32") -> None:
        import openvino_genai as genai

        self.genai: Jsonable = genai  # openvino_genai: no type information
        self.pipe = genai.LLMPipeline(str(export_model(model, "int8")), "CPU", **ov_config(precision))
        self.pipe.start_chat()

    def restart(self) -> None:
        """A new conversation (genai's prefix cache keeps the old one's blocks)."""
        self.pipe.finish_chat()
        self.pipe.start_chat()

    def timed_turn(self, history: list[dict[str, str]], tokens: int) -> tuple[float, str, int]:
        stamps: list[float] = []

        def stamp(piece: str) -> bool:
            if piece and not stamps:
                stamps.append(time.perf_counter())
            return False  # keep going

        config = self.genai.GenerationConfig(max_new_tokens=tokens, do_sample=False)
        t0 = time.perf_counter()
        reply = str(self.pipe.generate(history[-1]["content"], config, stamp))
        return (stamps[0] if stamps else time.perf_counter()) - t0, reply, 0


# What growing_chat times: a chatlab engine (its stream) or genai's own chat mode
Turnable = Union[ChatEngine, GenaiChatMode]


def timed_turn(engine: Turnable, history: list[dict[str, str]], tokens: int) -> tuple[float, str, int]:
    """(TTFT in s, reply text, prompt tokens) of one greedy turn through the engine's stream."""
    if isinstance(engine, GenaiChatMode):
        return engine.timed_turn(history, tokens)

    req = parse_request({"model": engine.model_name, "messages": history, "max_tokens": tokens,
                         "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    first, text, prompt_tokens = None, "", 0
    for chunk in engine.chat_stream(engine.check(req)):
        for choice in chunk["choices"]:
            piece = choice["delta"].get("content") or ""
            if piece and first is None:
                first = time.perf_counter() - t0
            text += piece
        if chunk.get("usage"):
            prompt_tokens = chunk["usage"]["prompt_tokens"]
    return (first if first is not None else time.perf_counter() - t0), text, prompt_tokens


# A warm-up message outside the question set: it shares only the template's opening with a turn
WARM_UP = "Passage: This conversation only warms the engine up.\n\nQuestion: What is it for?"


def warm_up(engines: "Mapping[str, Turnable]") -> None:
    """One untimed turn per engine on another conversation (one-time costs), then forgotten."""
    for engine in engines.values():
        timed_turn(engine, [{"role": "user", "content": WARM_UP}], 4)
        if isinstance(engine, GenaiChatMode):
            engine.restart()
        elif engine.prefix is not None:
            engine.prefix.forget()


def growing_chat(engines: "Mapping[str, Turnable]", turns: int = 8, tokens: int = 16,
                 pairs: Sequence[tuple[str, str]] = ()) -> dict[str, Jsonable]:
    """Each engine holds its own conversation (its own replies resent); turn t of every engine
    runs before turn t+1 of any, in an order that alternates, after an untimed warm-up. Each
    turn's row has the TTFT ratio "a/b" of every pair (a, b)."""
    messages = user_turns(turns)
    warm_up(engines)
    histories: dict[str, list[dict[str, str]]] = {name: [] for name in engines}
    rows: list[dict[str, Jsonable]] = []
    names = list(engines)
    for t, message in enumerate(messages, 1):
        row: dict[str, Jsonable] = {"turn": t}
        for name in (names if t % 2 else names[::-1]):
            engine, history = engines[name], histories[name]
            history.append({"role": "user", "content": message})
            ttft, reply, prompt_tokens = timed_turn(engine, history, tokens)
            history.append({"role": "assistant", "content": reply})
            row[f"{name}_ttft_ms"] = ttft * 1000
            row["prompt_tokens"] = max(row.get("prompt_tokens", 0), prompt_tokens)
            if not isinstance(engine, GenaiChatMode) and engine.prefix is not None:
                row[f"{name}_reused_tokens"] = engine.prefix.reused
        row.update({f"{a}/{b}": row[f"{a}_ttft_ms"] / row[f"{b}_ttft_ms"] for a, b in pairs})
        rows.append(row)
    replies = {name: [m["content"] for m in h if m["role"] == "assistant"] for name, h in histories.items()}
    return {"turns": rows, "engines": names, "new_tokens": tokens, "replies": replies}


def run(model: str = "smollm2-135m-instruct", turns: int = 8, tokens: int = 16,
        genai: bool = False) -> dict[str, Jsonable]:
    """Time a growing chat on chatlab's loop with and without prefix reuse (`genai`: and genai's
    pipeline with and without its prefix caching); print the JSON and a line per turn."""
    user_turns(turns)  # a turn count the question set cannot fill is refused before any load
    engines: dict[str, ChatEngine] = {
        "reuse": load_engine(model, "openvino", precision="f32", reuse_prefix=True),
        "plain": load_engine(model, "openvino", precision="f32")}
    pairs = [("reuse", "plain")]
    if genai:
        engines["genai-cache"] = load_engine(model, "genai", precision="f32", max_seqs=1, prefix_caching=True)
        engines["genai"] = load_engine(model, "genai", precision="f32", max_seqs=1)
        pairs += [("genai-cache", "genai"), ("reuse", "genai-cache")]
    result = growing_chat(engines, turns, tokens, pairs)
    print(json.dumps(result, indent=2))
    for row in result["turns"]:
        cells = "  ".join(f"{a}/{b} {row[f'{a}/{b}']:.2f}x" for a, b in pairs)
        times = "  ".join(f"{n} {row[f'{n}_ttft_ms']:.0f} ms" for n in result["engines"])
        print(f"turn {row['turn']} ({row['prompt_tokens']} prompt tokens): {times}  |  {cells}")
    return result
