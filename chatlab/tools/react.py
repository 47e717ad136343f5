"""The ReAct parsing machine (Qwen-1): Thought / Action / Action Input lines, then Observation.

The article's streaming answer: hold back a small buffer, and once the action marker appears
collect everything until the end (the engine stops at the observation stop word) and parse it
with the *last* action and action-input markers. What the user sees:
  - a call: the Thought before it (without its label) is the content;
  - a final answer: only the answer is content; the scratchpad before it is dropped;
  - text that is not ReAct at all is streamed as plain content.
A leading Thought is held back until it is clear which of these it belongs to. The marker
words are the format's (chatlab.tools.formats.react sets them on its subclass).
"""
from __future__ import annotations

import json
from typing import Sequence

from chatlab.tools.stream import StreamParser, find_marker, split_safe
from chatlab.types import ToolSpec


class ReActMachine(StreamParser):
    # line markers, set by the format: THOUGHT starts the reply, the others start a line
    THOUGHT = ACTION = INPUT = OBSERVATION = FINAL = ""

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.MARKERS = (self.ACTION, self.FINAL)
        self.opener = self.ACTION
        self.state = "start"
        self.pending = ""
        self.thought_parts: list[str] = []   # thought state: the held thought
        self.thought_tail = ""     # its last characters, where a marker may have begun
        self.thought: str | None = None
        self.said = False          # plain state: content already emitted
        self.call_parts: list[str] = []

    def _consume(self, text: str, final: bool) -> None:
        if self.state == "call":   # everything after the action marker is the call: collect
            self.call_parts.append(text)
        else:
            self.pending += text
            getattr(self, "_in_" + self.state)(final)
        if final and self.state == "call":
            self._parse_call()

    def _in_start(self, final: bool) -> None:
        if self.THOUGHT.startswith(self.pending) and not final:
            return
        if self.pending.startswith(self.THOUGHT):
            self.state = "thought"
            return self._in_thought(final)
        # a virtual newline lets the line markers match at the very start
        self.pending, self.state = "\n" + self.pending, "plain"
        self._in_plain(final)

    def _in_thought(self, final: bool) -> None:
        # The thought can be long: keep it in parts and search only the new text plus a tail
        # that a marker may straddle, so holding it back stays linear.
        self.thought_parts.append(self.pending)
        self.pending = ""
        tail = self.thought_tail + self.thought_parts[-1]
        hit = find_marker(tail, self.MARKERS)
        if hit is None:
            self.thought_tail = tail[-(len(self.FINAL) - 1):]
            if final:              # a thought and nothing else: give it back as it was
                self._content("".join(self.thought_parts))
            return
        held = "".join(self.thought_parts)
        pos, marker = len(held) - len(tail) + hit[0], hit[1]
        if marker == self.FINAL:
            self.state, self.pending = "answer", held[pos + len(self.FINAL):]
            return self._in_answer(final)
        self.thought = held[:pos]
        self._to_call(held[pos:])

    def _in_plain(self, final: bool) -> None:
        hit = find_marker(self.pending, self.MARKERS)
        if hit is None:
            safe, held = split_safe(self.pending, self.MARKERS)
            if final:
                safe, held = self.pending, ""
            self._say(safe)
            self.pending = held
            return
        pos, marker = hit
        if marker == self.FINAL:
            self._say(self.pending[:pos] + ("\n" if self.said or pos > 1 else ""))
            self.state, self.pending = "answer", self.pending[pos + len(self.FINAL):]
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
        if text or final:          # leading spaces after the final-answer label are the label's
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
        body = "\n" + region.lstrip("\n")   # the region starts at the action marker, newline or not
        stop = body.find(self.OBSERVATION)   # a hallucinated observation is not the call's
        body = body if stop < 0 else body[:stop]
        name_at, input_at = body.rfind(self.ACTION), body.rfind(self.INPUT)
        if input_at < name_at:
            why = f"the model wrote `{self.ACTION.strip()}` without `{self.INPUT.strip()}`"
            return self._reject(None, why, original)
        name = body[name_at + len(self.ACTION):input_at].strip()
        arguments = body[input_at + len(self.INPUT):].strip()
        if name not in self.names:
            return self._reject(None, self.unknown_tool(name), original)
        try:
            ok = isinstance(json.loads(arguments), dict)
        except ValueError:
            ok = False
        if not ok:
            return self._reject(None, f"`{self.INPUT.strip()}` is not a JSON object: {arguments[:80]!r}", original)
        if self.thought is not None:
            self._content(self.thought[len(self.THOUGHT):].strip())
        self._call(name, arguments)
