"""Notebook 06's exercises, without a model: stop strings, merged stream chunks, OpenAI error bodies."""
from __future__ import annotations

from chatlab._thirdparty import Jsonable
from chatlab.lab.exercises import Case, Exercise, register


def cut_at_stop_reference(text: str, stops: list[str]) -> tuple[str, str]:
    """(the text before the earliest stop string, "stop"), or (the text, "length") without one."""
    found = [(text.find(s), s) for s in stops if s and s in text]
    return (text[:min(found)[0]], "stop") if found else (text, "length")


register(Exercise("nb06.cut_at_stop", lambda: [
    Case(("The capital of France is Paris. It is", ["."]), "one stop"),
    Case(("no stop here", ["."]), "none: the reply ran to max_tokens"),
    Case(("a;b.c", [".", ";"]), "the earliest of two wins"),
    Case(("User: hi\nAssistant", ["\nUser:", "User:"]), "a stop at position 0"),
], reference=cut_at_stop_reference, same=lambda got, expected: tuple(got) == expected))


def merge_stream_reference(chunks: list[dict[str, Jsonable]]) -> str:
    """Every chunk's choices[0].delta.content in order; no choices (the usage chunk) or None adds nothing."""
    return "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices"))


def _chunk(content: str | None, role: bool = False) -> dict[str, Jsonable]:
    delta: dict[str, Jsonable] = {"content": content, "role": "assistant"} if role else {"content": content}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


register(Exercise("nb06.merge_stream", lambda: [
    Case(([_chunk("", role=True), _chunk("Ban"), _chunk("ana."), _chunk(None)],), "role first, None last"),
    Case(([_chunk("a"), {"object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 3}}],),
         "a usage chunk without choices"),
    Case(([],), "no chunks"),
], reference=merge_stream_reference))


def is_openai_error_reference(body: Jsonable) -> bool:
    """Whether `body` is OpenAI's error shape: {"error": {message, type, param, code}}."""
    return (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], dict)
            and set(body["error"]) == {"message", "type", "param", "code"})


register(Exercise("nb06.is_openai_error", lambda: [
    Case(({"error": {"message": "messages: too short", "type": "invalid_request_error", "param": "messages",
                     "code": None}},), "the server's 400"),
    Case(({"detail": "Not Found"},), "FastAPI's default body"),
    Case(({"error": {"message": "x", "type": "y"}},), "two fields missing"),
    Case(("Internal Server Error",), "plain text"),
], reference=is_openai_error_reference))
