"""Chat templates as data: what each role's turn is made of, at the level of token ids.

A turn is a tuple of parts. `T` is text the template writes (encoded like the template text of
a Jinja chat_template: special-token text in it becomes the special id if the tokenizer has
one); `S` is a special token that must become exactly one id whatever the tokenizer would do
with its text (ChatGLM3's tokenizer splits `<|user|>` written as text); `BOS`/`EOS` are the
tokenizer's own; `CONTENT` is where the message goes, always encoded as plain text; `BREAK`
ends a run of text so that what follows is encoded on its own (ChatGLM3 encodes the role's
"\\n" and the content separately); `ROUND` is the 1-based round number (ChatGLM2); `META` is
the turn's metadata line (ChatGLM3 writes a tool call's name there), encoded as content.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from chatlab.tools import ToolFormat


@dataclass(frozen=True)
class Part:
    kind: str  # "text" | "special" | "bos" | "eos" | "content" | "break" | "round" | "meta"
    value: str = ""

    def __repr__(self) -> str:
        return f"{self.kind.upper()}({self.value!r})" if self.value else self.kind.upper()


def T(text: str) -> Part:
    return Part("text", text)


def S(token: str) -> Part:
    return Part("special", token)


BOS, EOS, CONTENT, BREAK = Part("bos"), Part("eos"), Part("content"), Part("break")
ROUND, META = Part("round"), Part("meta")
# SEAM: where an engine encodes the text before and after apart (LLaMA-Factory encodes each slot
# element on its own, so no token merges, and no special token matches, across it). At id level a
# break; engines that tokenize the whole rendered text (Jinja, LMDeploy, Ollama exports) have none.
SEAM = Part("seam")
Parts = tuple[Part, ...]


@dataclass(frozen=True)
class Template:
    """One chat format. `roles` maps system/user/assistant/tool to their turn, each with one
    CONTENT; the generation prompt defaults to the assistant turn up to its CONTENT."""

    name: str
    description: str
    roles: Mapping[str, Parts]
    prefix: Parts = ()
    generation_prompt: Parts | None = None
    default_system: str | None = None
    # "turn": the system message is a turn of its own; "first-user": it is folded into the
    # first user turn through `system_merge` (llama2, mistral); "none": plain text prefix parts
    # written through `system_merge` before the first turn (baichuan2).
    system_style: str = "turn"
    system_merge: Parts = ()
    # LLaMA-Factory's `system = system or default_system`: an empty system message means the
    # default, and a system that is still empty writes no system block at all.
    empty_system_default: bool = False
    stop_words: tuple[str, ...] = ()
    stop_tokens: tuple[str, ...] = ()  # token strings; "eos" means the tokenizer's eos
    assistant_eos: bool = False  # an assistant turn in the history ends with the eos token
    tool_format: ToolFormat | None = None  # how tools, calls and results are written and parsed
    think: bool = False  # Qwen3: history reasoning is dropped; enable_thinking=False adds an empty block
    model_types: tuple[str, ...] = ()  # config model_type / name fragments that select it

    def turn(self, role: str) -> Parts:
        return self.roles.get(role) or self.roles["user"]

    def header(self, role: str) -> Parts:
        """The parts of a turn before its CONTENT."""
        parts = self.turn(role)
        return parts[:parts.index(CONTENT)]

    def footer(self, role: str) -> Parts:
        parts = self.turn(role)
        end = parts[parts.index(CONTENT) + 1:]
        return end + (EOS,) if role == "assistant" and self.assistant_eos else end

    def gen_prompt(self) -> Parts:
        return self.header("assistant") if self.generation_prompt is None else self.generation_prompt

    def _parts(self) -> list[Part]:
        groups = (self.prefix, self.system_merge, self.gen_prompt(), *self.roles.values())
        return [p for g in groups for p in g]

    def special_tokens(self) -> list[str]:
        """Every special token the template refers to (a tokenizer must have them all)."""
        specials = [p.value for p in self._parts() if p.kind == "special"]
        return list(dict.fromkeys([*specials, *(tok for tok in self.stop_tokens if tok != "eos")]))

    def uses(self, kind: str) -> bool:
        return any(p.kind == kind for p in self._parts()) or (kind == "eos" and self.assistant_eos)
