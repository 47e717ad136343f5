"""The parsing machine for calls written as JSON objects, with or without wrapping tags.

States of the machine:
  start   beginning of the output, or right after a call: whitespace (and a lead tag such as
          llama3's python tag) is held; a `{` here may be a bare JSON call.
  content plain text, scanned for the open tag (Hermes'), partial tags held back.
  call    inside a JSON object (see jsoncall.JsonCall).
  close   a tagged object ended: optional whitespace and the close tag are eaten.
  bad     a tagged call that is not JSON: collected up to the close tag, then given back as
          content with the reason.
The tags and separators are the format's: chatlab.tools.formats sets them on subclasses.
"""
from __future__ import annotations

from typing import Sequence

from chatlab.tools.jsoncall import JsonCall
from chatlab.tools.stream import WHITESPACE, StreamParser, find_marker, split_safe
from chatlab.types import ToolSpec


class JsonCallParser(StreamParser):
    open_tag: str | None = None
    close_tag: str | None = None
    lead_tags: tuple[str, ...] = ()
    separators = ""                    # between bare calls, e.g. llama3's ';'

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.opener = self.open_tag
        self.state = "start"
        self.after_call = False
        self.pending = ""              # held text (always short, except inside bad calls)
        self.call: JsonCall | None = None
        self.searched = 0              # how much of pending the bad state already searched
        self.closed = False            # close state: the call was valid and has ended

    def _consume(self, text: str, final: bool) -> None:
        self.pending += text
        while True:
            before = (self.state, len(self.pending))
            getattr(self, "_in_" + self.state)(final)
            if (self.state, len(self.pending)) == before:
                break
        if final and self.pending:    # only held text can remain; it is content
            self._content(self.pending if not self.after_call else self.pending.lstrip(WHITESPACE))
            self.pending = ""

    def _in_start(self, final: bool) -> None:
        s, strip = self.pending, WHITESPACE + (self.separators if self.after_call else "")
        rest = s.lstrip(strip)
        for tag in self.lead_tags:
            if rest.startswith(tag):
                rest = rest[len(tag):].lstrip(WHITESPACE)
            elif tag.startswith(rest) and rest and not final:
                return                 # could still be the lead tag
        if not rest and not final:
            return                     # only whitespace so far
        if rest.startswith("{"):
            cut = len(s) - len(rest)
            self.call = JsonCall(self, s[:cut], tagged=False)
            self.pending, self.state = s[cut:], "call"
            return
        if self.after_call:            # whitespace (and separators) after a call are not content
            s = s.lstrip(WHITESPACE)
        self.pending, self.state, self.after_call = s, "content", False

    def _in_content(self, final: bool) -> None:
        if self.open_tag is None:
            self._content(self.pending)
            self.pending = ""
            return
        hit = find_marker(self.pending, (self.open_tag,))
        if hit is None:
            safe, self.pending = split_safe(self.pending, (self.open_tag,))
            self._content(safe)
            return
        pos = hit[0]
        before = self.pending[:pos]
        kept = before.rstrip(WHITESPACE)
        self._content(kept)
        self.call = JsonCall(self, before[len(kept):] + self.open_tag, tagged=True)
        self.pending, self.state = self.pending[pos + len(self.open_tag):], "call"

    def _open_call(self) -> JsonCall:
        """The call being parsed: the call, close and bad states exist only while one is open."""
        assert self.call is not None, f"state {self.state!r} without an open call"
        return self.call

    def _close_tag(self) -> str:
        """The close tag: the close and bad states follow an open tag, and a format that sets an
        open tag sets its close tag too."""
        assert self.close_tag is not None, f"{type(self).__name__} has an open tag but no close tag"
        return self.close_tag

    def _in_call(self, final: bool) -> None:
        call = self._open_call()
        used = call.feed(self.pending)
        self.pending = self.pending[used:]
        scan = call.scan
        if scan.done:
            if not call.committed:     # a JSON object that is not a call: plain content
                self._give_back(call.prefix + scan.text())
            elif call.tagged:          # a valid call is final now; the close tag is then eaten
                self.state, self.closed = "close", call.check()[1] is None and call.close()
            elif call.close():
                self.state, self.after_call = "start", True
            else:
                self.state = "content"
        elif scan.state == "invalid":
            if not call.committed:
                self._give_back(call.prefix + scan.text())
            elif call.tagged:
                self.state = "bad"
            else:
                call.reject(scan.error or "invalid JSON")
                self.state = "content"
        elif final:
            if call.committed:
                call.reject("the output ended inside the tool call (unterminated JSON)", self.pending)
                self.pending, self.state = "", "content"
            else:
                self._give_back(call.prefix + scan.text())

    def _give_back(self, text: str) -> None:
        self._content(text)
        self.state, self.after_call = "content", False

    def _in_close(self, final: bool) -> None:
        s, call, close_tag = self.pending, self._open_call(), self._close_tag()
        rest = s.lstrip(WHITESPACE)
        if rest.startswith(close_tag):
            end = len(s) - len(rest) + len(close_tag)
        elif close_tag.startswith(rest) and not final:
            return                     # the close tag may still be arriving
        elif close_tag.startswith(rest) and rest:
            end = len(s)               # the output ended inside the close tag: markup, not content
        else:                          # a missing close tag is tolerated after a whole object
            end = 0
        if not self.closed:            # malformed: the tag goes back to content with the call
            call.reject(call.check()[1] or "malformed tool call", s[:end])
        self.pending = s[end:]
        self.state, self.after_call = ("start", True) if self.closed else ("content", False)

    def _in_bad(self, final: bool) -> None:
        # search only new text (minus a partial tag) so a long bad call stays linear
        call, close_tag = self._open_call(), self._close_tag()
        hit = find_marker(self.pending, (close_tag,), max(0, self.searched - len(close_tag)))
        self.searched = len(self.pending)
        if hit is None and not final:
            return
        end = len(self.pending) if hit is None else hit[0] + len(close_tag)
        call.reject(call.scan.error or "invalid JSON", self.pending[:end])
        self.pending, self.state, self.searched = self.pending[end:], "content", 0

