"""OpenAI's response shapes, built in one place so the CLI and the server cannot drift apart.

Wire details real clients depend on: the last choice chunk has an empty delta and the
finish_reason; the optional usage chunk has `choices: []`.
"""
from __future__ import annotations

import time
import uuid

from chatlab.types.responses import (ChatChoice, ChatCompletion, ChatCompletionChunk, ChatLogprobs, Delta,
                                     TextChoice, TextCompletionChunk, Usage)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt: int, completion: int) -> Usage:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


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
