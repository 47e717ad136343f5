"""OpenAI's response shapes, built in one place so the CLI and the server cannot drift apart.

Subtle wire details that real clients depend on (reference §4): the last choice chunk has an
empty delta and the finish_reason; the optional usage chunk has `choices: []`. The deltas
themselves (a tool call's id and name once, then argument pieces) are chatlab.engine.accumulate's.
"""
from __future__ import annotations

import time
import uuid

from chatlab._thirdparty import Jsonable


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def completion(cid: str, model: str, choices: list[dict[str, Jsonable]], use: dict[str, int]) -> dict[str, Jsonable]:
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": use, "system_fingerprint": "chatlab"}


def chunk(cid: str, model: str, index: int, delta: dict[str, Jsonable],
          finish_reason: str | None = None, logprobs: dict[str, Jsonable] | None = None) -> dict[str, Jsonable]:
    return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "chatlab",
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs,
                         "finish_reason": finish_reason}]}


def usage_chunk(cid: str, model: str, use: dict[str, int]) -> dict[str, Jsonable]:
    return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [], "usage": use}


def text_completion(cid: str, model: str, choices: list[dict[str, Jsonable]], use: dict[str, int] | None,
                    obj: str = "text_completion") -> dict[str, Jsonable]:
    body: dict[str, Jsonable] = {"id": cid, "object": obj, "created": int(time.time()), "model": model,
                            "choices": choices}
    if use is not None:
        body["usage"] = use
    return body
