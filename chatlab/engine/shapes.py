"""OpenAI's response shapes, built and merged in one place so the CLI and the server agree: a
non-streamed reply is the merge of the same chunks the Accumulator makes from parser events."""
from __future__ import annotations

import time
import uuid
from typing import Iterable

from chatlab.generate import Finished
from chatlab.tools.stream import (ContentDelta, ParserEvent, ToolCallArgs, ToolCallEnd, ToolCallError,
                                  ToolCallStart)
from chatlab.types.responses import (AssistantFunctionCall, AssistantMessage, AssistantToolCall, ChatChoice,
                                     ChatCompletion, ChatCompletionChunk, ChatLogprobs, Delta, LogprobEntry,
                                     TextChoice, TextCompletion, TextCompletionChunk, TextLogprobs, Usage)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt: int, completion: int) -> Usage:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(cid: str, model: str, choices: list[ChatChoice], use: Usage) -> ChatCompletion:
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": use, "system_fingerprint": "chatlab"}


def chunk(cid: str, model: str, index: int, delta: Delta,
          finish_reason: str | None = None, logprobs: ChatLogprobs | None = None) -> ChatCompletionChunk:
    return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "chatlab",
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs,
                         "finish_reason": finish_reason}]}


def usage_chunk(cid: str, model: str, use: Usage) -> ChatCompletionChunk:
    return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [], "usage": use}


def text_completion(cid: str, model: str, choices: list[TextChoice], use: Usage | None) -> TextCompletionChunk:
    body: TextCompletionChunk = {"id": cid, "object": "text_completion", "created": int(time.time()),
                                 "model": model, "choices": choices}
    if use is not None:
        body["usage"] = use
    return body


class Accumulator:
    """Turns one choice's parser events into `delta` dicts (OpenAI's streaming shape)."""

    def __init__(self, legacy: bool = False) -> None:
        self.legacy = legacy  # old `functions` requests: one call, as `function_call`
        self.wire: dict[int, int] = {}  # parser's call index -> index on the wire
        self.finished: Finished | None = None  # the loop's, set before the parser's final events

    def feed(self, ev: ParserEvent) -> list[Delta]:
        if isinstance(ev, ContentDelta):
            return [{"content": ev.text}] if ev.text else []
        if isinstance(ev, ToolCallStart):
            if self.legacy and self.wire:
                return []  # the old shape carries one call: later ones are dropped
            i = self.wire[ev.index] = len(self.wire)
            if self.legacy:
                return [{"function_call": {"name": ev.name, "arguments": ""}}]
            return [{"tool_calls": [{"index": i, "id": ev.id, "type": "function",
                                     "function": {"name": ev.name, "arguments": ""}}]}]
        if isinstance(ev, ToolCallArgs):
            if ev.index not in self.wire or not ev.fragment:
                return []
            if self.legacy:
                return [{"function_call": {"arguments": ev.fragment}}]
            return [{"tool_calls": [{"index": self.wire[ev.index], "function": {"arguments": ev.fragment}}]}]
        if isinstance(ev, ToolCallEnd):
            return []  # the arguments already went out piece by piece
        if isinstance(ev, ToolCallError):
            # announced: the call stands as sent; cut off by the length limit: not an answer
            cut = self.finished is not None and self.finished.finish_reason == "length"
            return [] if ev.index is not None or cut or not ev.text else [{"content": ev.text}]
        raise TypeError(f"not a parser event: {ev!r}")

    def finish_reason(self, loop_reason: str) -> str:
        """The loop's reason ("stop" / "length"), or the call reason when calls were made."""
        if loop_reason == "length" or not self.wire:
            return loop_reason
        return "function_call" if self.legacy else "tool_calls"


def _merge_choice(deltas: Iterable[Delta]) -> AssistantMessage:
    text: list[str] = []
    calls: dict[int, AssistantToolCall] = {}
    legacy: AssistantFunctionCall | None = None
    for delta in deltas:
        text.append(delta.get("content") or "")
        for c in delta.get("tool_calls") or []:
            call = calls.setdefault(c["index"], {"id": c.get("id"), "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            call["function"]["name"] += c.get("function", {}).get("name") or ""
            call["function"]["arguments"] += c.get("function", {}).get("arguments") or ""
        fc = delta.get("function_call")
        if fc:
            legacy = legacy or {"name": "", "arguments": ""}
            legacy["name"] += fc.get("name") or ""
            legacy["arguments"] += fc.get("arguments") or ""
    content = "".join(text)
    message: AssistantMessage = {"role": "assistant", "content": None if (calls or legacy) and not content else content,
                        "refusal": None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if legacy:
        message["function_call"] = legacy
    return message


def merge_chunks(chunks: list[ChatCompletionChunk]) -> ChatCompletion:
    """A `chat.completion` equal to what a client gets by adding up the streamed chunks."""
    by_index: dict[int, list[Delta]] = {}
    reasons: dict[int, str] = {}
    logprobs: dict[int, list[LogprobEntry]] = {}
    usage: Usage | None = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            i = choice["index"]
            by_index.setdefault(i, []).append(choice["delta"])
            if tokens := choice.get("logprobs"):
                logprobs.setdefault(i, []).extend(tokens.get("content") or [])
            if reason := choice.get("finish_reason"):
                reasons[i] = reason
    choices: list[ChatChoice] = []
    for i in sorted(by_index):
        lp: ChatLogprobs | None = {"content": logprobs[i], "refusal": None} if i in logprobs else None
        choices.append({"index": i, "message": _merge_choice(by_index[i]), "logprobs": lp,
                        "finish_reason": reasons.get(i)})
    first = chunks[0]
    return {"id": first["id"], "object": "chat.completion", "created": first["created"],
            "model": first["model"], "choices": choices, "usage": usage,
            "system_fingerprint": first.get("system_fingerprint")}


def merge_text_chunks(chunks: list[TextCompletionChunk]) -> TextCompletion:
    """The same for `/v1/completions`: text pieces per choice index, concatenated."""
    texts: dict[int, list[str]] = {}
    reasons: dict[int, str] = {}
    logprobs: dict[int, TextLogprobs] = {}
    usage: Usage | None = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            i = choice["index"]
            texts.setdefault(i, []).append(choice.get("text") or "")
            if reason := choice.get("finish_reason"):
                reasons[i] = reason
            if lp := choice.get("logprobs"):
                into = logprobs.setdefault(i, {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                               "text_offset": []})
                into["tokens"] += lp["tokens"]
                into["token_logprobs"] += lp["token_logprobs"]
                into["top_logprobs"] += lp["top_logprobs"]
                into["text_offset"] += lp["text_offset"]
    first = chunks[0]
    choices: list[TextChoice] = [{"index": i, "text": "".join(texts[i]), "logprobs": logprobs.get(i),
                "finish_reason": reasons.get(i)} for i in sorted(texts)]
    return {"id": first["id"], "object": "text_completion", "created": first["created"],
            "model": first["model"], "choices": choices, "usage": usage}
