"""A notebook chat with the ChatGLM2 article's controls; each turn is a ChatEngine request, as served."""
from __future__ import annotations

import html
from typing import Iterator

from chatlab._thirdparty import Jsonable
from chatlab.engine import ChatEngine, parse_request
from chatlab.engine.plan import ChatPlan
from chatlab.generate import Finished, SamplingParams, TextDelta
from chatlab.protocols import StepBackend


class ChatWidget:
    def __init__(self, backend: StepBackend | ChatEngine, model_name: str | None = None,
                 system: str = "You are a helpful assistant. Answer briefly.",
                 reuse_prefix: bool = False) -> None:
        """`backend`: a step backend or a ChatEngine to share; `reuse_prefix` (for a backend the
        widget wraps): each turn prefills only what is new since the last one."""
        import ipywidgets as w

        self.engine = backend if isinstance(backend, ChatEngine) else \
            ChatEngine(backend, model_name or "", reuse_prefix=reuse_prefix)
        self.history: list[dict[str, Jsonable]] = []
        self.last: Finished | None = None
        self.system = w.Textarea(value=system, description="System", layout=w.Layout(width="98%"))
        self.max_tokens = w.IntSlider(value=128, min=1, max=1024, description="Max tokens")
        self.top_k = w.IntSlider(value=50, min=0, max=200, description="Top-k")
        self.top_p = w.FloatSlider(value=0.9, min=0.05, max=1.0, step=0.05, description="Top-p")
        self.temperature = w.FloatSlider(value=0.7, min=0.0, max=2.0, step=0.05,
                                         description="Temperature")
        # Enter commits the value and the observer sends it (ipywidgets 8 deprecates on_submit)
        self.prompt = w.Text(placeholder="Ask something and press Enter",
                             layout=w.Layout(width="70%"), continuous_update=False)
        self.button = w.Button(description="Send", button_style="primary")
        self.clear = w.Button(description="Clear")
        self.transcript = w.HTML(layout=w.Layout(border="1px solid #ccc", padding="6px",
                                                 min_height="120px", width="98%"))
        self.status = w.Label()
        self.button.on_click(lambda _b: self._send_from_box())
        self.prompt.observe(lambda _change: self._send_from_box(), names="value")
        self.clear.on_click(lambda _b: self.reset())
        controls = w.HBox([w.VBox([self.max_tokens, self.top_k]),
                           w.VBox([self.top_p, self.temperature])])
        self.view = w.VBox([self.system, controls, self.transcript,
                            w.HBox([self.prompt, self.button, self.clear]), self.status])
        # stable CSS classes for the browser test: ipywidgets' own class names change
        for widget, name in ((self.view, "chat"), (self.system, "chat-system"),
                             (self.prompt, "chat-prompt"), (self.button, "chat-send"),
                             (self.clear, "chat-clear"), (self.transcript, "chat-transcript"),
                             (self.status, "chat-status")):
            widget.add_class(f"chatlab-{name}")

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.view)

    def reset(self) -> None:
        self.history.clear()
        self.transcript.value = ""

    def params(self) -> SamplingParams:
        """The sliders' values (validated: a bad value raises ChatlabError naming the range)."""
        return SamplingParams(max_new_tokens=self.max_tokens.value, temperature=self.temperature.value,
                              top_k=self.top_k.value, top_p=self.top_p.value)

    def plan(self, message: str, seed: int | None = None) -> ChatPlan:
        """The engine's plan for the conversation plus `message`, with the sliders' sampling: the
        template's stop words and ids end the turn (the loop adds the model's eos ids)."""
        self.params()  # the sliders' values, checked with the widget's own message first
        messages = [{"role": "system", "content": self.system.value}, *self.history,
                    {"role": "user", "content": message}]
        return self.engine.check(parse_request({
            "messages": messages, "max_tokens": self.max_tokens.value, "temperature": self.temperature.value,
            "top_k": self.top_k.value, "top_p": self.top_p.value, "seed": seed}))

    def stream(self, message: str, seed: int | None = None) -> Iterator[str]:
        """Add a user turn, yield the reply's text deltas, then record the reply in history."""
        plan = self.plan(message, seed)
        self.history.append({"role": "user", "content": message})
        reply = ""
        for event in self.engine.events(plan):
            if isinstance(event, TextDelta):
                reply += event.text
                self._show(reply)
                yield event.text
            else:
                self.last = event
        self.history.append({"role": "assistant", "content": reply})
        self._show(None)  # the finished transcript, without the typing cursor
        if (done := self.last) is not None:
            self.status.value = (f"{done.completion_tokens} tokens, finish_reason={done.finish_reason}, "
                                 f"first token after {done.timings['ttft_s'] * 1000:.0f} ms")

    def send(self, message: str, seed: int | None = None, echo: bool = True) -> str:
        parts = []
        for delta in self.stream(message, seed):
            parts.append(delta)
            if echo:
                print(delta, end="", flush=True)
        if echo:
            print()
        return "".join(parts)

    def _send_from_box(self) -> None:
        text, self.prompt.value = self.prompt.value.strip(), ""
        if text:  # clearing the box fires the observer again, with nothing to send
            for _ in self.stream(text):
                pass

    def _show(self, pending_reply: str | None) -> None:
        """The transcript; a reply still streaming gets a cursor (None: nothing pending)."""
        rows = [f"<b>{m['role']}</b>: {html.escape(m['content'])}" for m in self.history]
        if pending_reply is not None:
            rows.append(f"<b>assistant</b>: {html.escape(pending_reply)}▌")
        self.transcript.value = "<br>".join(rows).replace("\n", "<br>")
