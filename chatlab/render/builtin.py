"""The built-in templates, written as data (see template.py), and the registry.

Each follows its model's official prompt code (or its tokenizer's chat_template where that is
right): ChatML and its Qwen/Yi/SmolLM2 variants, ChatGLM3 as `build_chat_input` builds it,
ChatGLM2's numbered rounds, Llama 2/3, Mistral and Baichuan2. Stop words and stop ids are part
of each template, because a server that takes them from elsewhere gets them wrong.
"""
from __future__ import annotations

from chatlab.errors import UnknownNameError
from chatlab.render.template import BOS, BREAK, CONTENT, META, ROUND, S, T, Template
from chatlab.tools import CHATGLM3, HERMES, JSON, REACT


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
