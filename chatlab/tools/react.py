"""Qwen-1 ReAct: `Thought: ... \nAction: name\nAction Input: {json}` then `Observation:`.

The article's streaming answer: hold back a small buffer, and once `\nAction:` appears collect
everything until the end (the engine stops at the stop word `Observation:`) and parse it with
the *last* `\nAction:` and `\nAction Input:`. What the user sees:
  - a call: the Thought before it (without the `Thought:` label) is the content;
  - `Final Answer:`: only the answer is content; the scratchpad before it is dropped;
  - text that is not ReAct at all is streamed as plain content.
A leading Thought is held back until it is clear which of these it belongs to.
"""
from __future__ import annotations

import json

from chatlab.tools.stream import StreamParser, find_marker, split_safe

THOUGHT, ACTION, INPUT, OBSERVATION, FINAL = (
    "Thought:", "\nAction:", "\nAction Input:", "\nObservation:", "\nFinal Answer:")
MARKERS = (ACTION, FINAL)


class ReActParser(StreamParser):
    fmt = "react"

    def __init__(self, tools: object = None) -> None:
        super().__init__(tools)
        self.state = "start"
        self.pending = ""
        self.thought_parts: list[str] = []   # thought state: the held thought
        self.thought_tail = ""     # its last characters, where a marker may have begun
        self.thought: str | None = None
        self.said = False          # plain state: content already emitted
        self.call_parts: list[str] = []

    def _consume(self, text: str, final: bool) -> None:
        if self.state == "call":   # everything after `\nAction:` is the call: just collect
            self.call_parts.append(text)
        else:
            self.pending += text
            getattr(self, "_in_" + self.state)(final)
        if final and self.state == "call":
            self._parse_call()

    def _in_start(self, final: bool) -> None:
        if THOUGHT.startswith(self.pending) and not final:
            return
        if self.pending.startswith(THOUGHT):
            self.state = "thought"
            return self._in_thought(final)
        # a virtual newline lets `Action:` / `Final Answer:` match at the very start
        self.pending, self.state = "\n" + self.pending, "plain"
        self._in_plain(final)

    def _in_thought(self, final: bool) -> None:
        # The thought can be long: keep it in parts and search only the new text plus a tail
        # that a marker may straddle, so holding it back stays linear.
        self.thought_parts.append(self.pending)
        self.pending = ""
        tail = self.thought_tail + self.thought_parts[-1]
        hit = find_marker(tail, MARKERS)
        if hit is None:
            self.thought_tail = tail[-(len(FINAL) - 1):]
            if final:              # a thought and nothing else: give it back as it was
                self._content("".join(self.thought_parts))
            return
        held = "".join(self.thought_parts)
        pos, marker = len(held) - len(tail) + hit[0], hit[1]
        if marker == FINAL:
            self.state, self.pending = "answer", held[pos + len(FINAL):]
            return self._in_answer(final)
        self.thought = held[:pos]
        self._to_call(held[pos:])

    def _in_plain(self, final: bool) -> None:
        hit = find_marker(self.pending, MARKERS)
        if hit is None:
            safe, held = split_safe(self.pending, MARKERS)
            if final:
                safe, held = self.pending, ""
            self._say(safe)
            self.pending = held
            return
        pos, marker = hit
        if marker == FINAL:
            self._say(self.pending[:pos] + ("\n" if self.said or pos > 1 else ""))
            self.state, self.pending = "answer", self.pending[pos + len(FINAL):]
            return self._in_answer(final)
        kept = self.pending[:pos].rstrip()
        self._say(kept)
        self.thought = None
        self._to_call(self.pending[len(kept):] if self.said else self.pending[max(len(kept), 1):])

    def _say(self, text: str) -> None:
        if not self.said and text.startswith("\n"):
            text = text[1:]        # the virtual newline is not content
        self.said = self.said or bool(text)
        self._content(text)

    def _in_answer(self, final: bool) -> None:
        text = self.pending.lstrip(" ")
        if text or final:          # leading spaces after `Final Answer:` are the label's
            self.state = "answer_body"
            self._content(text)
        self.pending = ""

    def _in_answer_body(self, final: bool) -> None:
        self._content(self.pending)
        self.pending = ""

    def _to_call(self, text: str) -> None:
        self.state, self.pending, self.call_parts = "call", "", [text]

    def _parse_call(self) -> None:
        region = "".join(self.call_parts)
        original = (self.thought or "") + region
        body = "\n" + region.lstrip("\n")    # the region starts at `Action:`, newline or not
        stop = body.find(OBSERVATION)         # a hallucinated observation is not the call's
        body = body if stop < 0 else body[:stop]
        name_at, input_at = body.rfind(ACTION), body.rfind(INPUT)
        if input_at < name_at:
            return self._reject(None, "the model wrote `Action:` without `Action Input:`", original)
        name = body[name_at + len(ACTION):input_at].strip()
        arguments = body[input_at + len(INPUT):].strip()
        if name not in self.names:
            return self._reject(None, self.unknown_tool(name), original)
        try:
            ok = isinstance(json.loads(arguments), dict)
        except ValueError:
            ok = False
        if not ok:
            return self._reject(None, f"`Action Input:` is not a JSON object: {arguments[:80]!r}", original)
        if self.thought is not None:
            self._content(self.thought[len(THOUGHT):].strip())
        self._call(name, arguments)
