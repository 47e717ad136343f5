"""Chat templates as data at the level of token ids, and the built-in ones after their models'
official prompt code. A turn is a tuple of parts: `T` template text; `S` a special token that must
be one id; `BOS`/`EOS`; `CONTENT` (always plain text); `BREAK` (what follows is encoded on its own);
`ROUND` (ChatGLM2's round number); `META` (ChatGLM3's metadata line)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Mapping

from chatlab.errors import UnknownNameError
from chatlab.tools import CHATGLM3, HERMES, JSON, REACT, ToolFormat


@dataclass(frozen=True)
class Part:
    kind: str  # "text" | "special" | "bos" | "eos" | "content" | "break" | "round" | "meta"
    value: str = ""

    def __repr__(self) -> str:
        return f"{self.kind.upper()}({self.value!r})" if self.value else self.kind.upper()


T = partial(Part, "text")  # template text
S = partial(Part, "special")  # a special token, which must be one id
BOS, EOS, CONTENT, BREAK = Part("bos"), Part("eos"), Part("content"), Part("break")
ROUND, META = Part("round"), Part("meta")
# SEAM: where LLaMA-Factory encodes the text before and after apart (at id level a break; engines
# that tokenize the whole rendered text have none).
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
    # "turn": a turn of its own; "first-user": folded into the first user turn through
    # `system_merge`; "none": `system_merge` written before the first turn.
    system_style: str = "turn"
    system_merge: Parts = ()
    # LLaMA-Factory: an empty system message means the default, and an empty default none.
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

    def stop_strings(self) -> list[str]:
        """Stop words plus named stop tokens ("eos" is implied by every engine)."""
        return list(dict.fromkeys([*self.stop_words, *(s for s in self.stop_tokens if s != "eos")]))

    def uses(self, kind: str) -> bool:
        return any(p.kind == kind for p in self._parts()) or (kind == "eos" and self.assistant_eos)


def _chatml(role: str) -> tuple:
    return (S("<|im_start|>"), T(f"{role}\n"), CONTENT, S("<|im_end|>"), T("\n"))


CHATML_ROLES = {r: _chatml(r) for r in ("system", "user", "assistant", "tool")}


def _glm3(role: str) -> tuple:
    # build_single_message: <|role|> + encode(metadata + "\n") + encode(content), apart.
    return (S(f"<|{role}|>"), META, T("\n"), BREAK, CONTENT)


def _llama3(role: str) -> tuple:
    return (S("<|start_header_id|>"), T(role), S("<|end_header_id|>"), T("\n\n"), CONTENT, S("<|eot_id|>"))


_ALL = [
    Template("chatml", "ChatML, the fallback when nothing else applies", CHATML_ROLES,
             stop_tokens=("<|im_end|>", "eos"), tool_format=HERMES),
    Template("smollm2", "SmolLM2-Instruct: ChatML with SmolLM's default system prompt", CHATML_ROLES,
             default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
             stop_tokens=("<|im_end|>", "eos"), tool_format=HERMES, model_types=("smollm",)),
    Template("qwen", "Qwen-1 chat (make_context): ChatML, ReAct function calling", CHATML_ROLES,
             default_system="You are a helpful assistant.",
             stop_tokens=("<|im_end|>", "<|endoftext|>"), tool_format=REACT,
             model_types=("qwen1", "qwen-", "qwen_", "qwen")),
    Template("qwen2.5", "Qwen2.5-Instruct: ChatML, Hermes tool calls", CHATML_ROLES,
             default_system="You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
             stop_tokens=("<|im_end|>", "<|endoftext|>"), tool_format=HERMES,
             model_types=("qwen2",)),
    Template("qwen3", "Qwen3: ChatML, Hermes tool calls, <think> reasoning", CHATML_ROLES,
             stop_tokens=("<|im_end|>", "<|endoftext|>"), tool_format=HERMES, think=True,
             model_types=("qwen3",)),
    Template("chatglm3", "ChatGLM3 (build_chat_input): role ids, tools in the system turn, observation turns",
             {"system": _glm3("system"), "user": _glm3("user"), "assistant": _glm3("assistant"),
              "tool": _glm3("observation")},
             prefix=(S("[gMASK]"), S("sop")), generation_prompt=(S("<|assistant|>"),),
             stop_tokens=("eos", "<|user|>", *CHATGLM3.end_tokens), tool_format=CHATGLM3,
             model_types=("chatglm3", "chatglm")),
    Template("chatglm2", "ChatGLM2: [Round n] 问/答 rounds after [gMASK] sop",
             {"user": (T("[Round "), ROUND, T("]\n\n问："), CONTENT, T("\n\n答：")),
              "assistant": (CONTENT, T("\n\n"))},
             prefix=(S("[gMASK]"), S("sop")), generation_prompt=(), system_style="none",
             system_merge=(CONTENT, T("\n\n")), stop_tokens=("eos",), model_types=("chatglm2",)),
    Template("llama2", "Llama 2 chat: [INST] turns, <<SYS>> folded into the first one",
             {"user": (BOS, T("[INST] "), CONTENT, T(" [/INST]")), "assistant": (T(" "), CONTENT, T(" "))},
             generation_prompt=(), system_style="first-user",
             system_merge=(T("<<SYS>>\n"), CONTENT, T("\n<</SYS>>\n\n")), assistant_eos=True,
             stop_tokens=("eos",), model_types=("llama-2", "llama2")),
    Template("llama3", "Llama 3 instruct: header ids, <|eot_id|>, JSON tool calls",
             {"system": _llama3("system"), "user": _llama3("user"), "assistant": _llama3("assistant"),
              "tool": _llama3("ipython")},
             prefix=(S("<|begin_of_text|>"),), stop_tokens=("<|eot_id|>", "<|eom_id|>", "eos"),
             tool_format=JSON, model_types=("llama-3", "llama3", "llama")),
    Template("mistral", "Mistral instruct v0.1: [INST] turns, system text before the first question",
             {"user": (T("[INST] "), CONTENT, T(" [/INST]")), "assistant": (CONTENT,)},
             prefix=(BOS,), generation_prompt=(), system_style="first-user",
             system_merge=(CONTENT, T("\n\n")), assistant_eos=True, stop_tokens=("eos",),
             model_types=("mistral", "mixtral")),
    Template("baichuan2", "Baichuan2 chat: <reserved_106> user, <reserved_107> assistant ids",
             {"user": (S("<reserved_106>"), CONTENT), "assistant": (S("<reserved_107>"), CONTENT)},
             system_style="none", system_merge=(CONTENT,), stop_tokens=("eos",),
             model_types=("baichuan",)),
    Template("yi", "Yi chat: ChatML", CHATML_ROLES, stop_tokens=("<|im_end|>", "<|endoftext|>", "eos"),
             model_types=("yi-", "yi_")),
]
TEMPLATES: dict[str, Template] = {t.name: t for t in _ALL}


def list_templates() -> list[str]:
    return list(TEMPLATES)


def get_template(name: str) -> Template:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise UnknownNameError("template", name, list(TEMPLATES)) from None
