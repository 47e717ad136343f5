"""Which renderer a model gets, and why: the resolution chain of the RTP-LLM article.

1. "explicit": a template named by the user;
2. "model-renderer": a model whose official prompt is built in code, not by its chat_template
   (ChatGLM3's build_chat_input, whose chat_template splits role tokens; Qwen-1's make_context,
   which has no chat_template; ChatGLM2 and Baichuan2, built in code);
3. "tokenizer-template": the tokenizer's own chat_template, through the safe Jinja path;
4. "model-type": a built-in template chosen from the model's type or name;
5. "chatml-fallback": ChatML.
Every Resolution says which rule chose it and why, and renders at id level.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from pathlib import Path

    from chatlab.render.io import LoadedTemplate

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.render.builtin import TEMPLATES
from chatlab.render.ids import Rendered
# Resolution and its helpers live in resolution.py; re-exported here, where callers look for them.
from chatlab.render.resolution import (END_MARKERS, Resolution, as_messages, builtin_resolution, by_model_type,
                                      identity_of)
from chatlab.tools import format_of_chat_template

# What `template=` takes: a built-in name or a file's path, a loaded file, or a Resolution
TemplateChoice = Union[str, "Path", "LoadedTemplate", Resolution, None]

__all__ = ["END_MARKERS", "MODEL_RENDERERS", "Resolution", "as_messages", "render_ids", "resolve"]

# (pattern over model name / tokenizer class, template, why its renderer is code)
MODEL_RENDERERS = [
    (r"chatglm3|chatglm-?3|ChatGLM3Tokenizer", "chatglm3",
     "ChatGLM3's official prompt is build_chat_input (role tokens as single ids); its chat_template, "
     "once encoded, splits <|user|> and friends into ordinary pieces"),
    (r"chatglm2", "chatglm2", "ChatGLM2 builds its [Round n] prompt in code (build_prompt)"),
    (r"qwen1-tokenizer|qwen-(?:1_8b|7b|14b|72b)-chat|Qwen1Tokenizer|QWenTokenizer", "qwen",
     "Qwen-1 ships no chat_template; its make_context builds ChatML in code, with ReAct for tools"),
    (r"baichuan2", "baichuan2", "Baichuan2 builds its prompt in code (build_chat_input)"),
]


def resolve(tokenizer: HFTokenizer, model_name: str | None = None,
            template: "TemplateChoice" = None) -> Resolution:
    """`template`: a built-in name, a template file (Jinja, LMDeploy JSON, Ollama Modelfile,
    LLaMA-Factory slots: chatlab.render.io), a LoadedTemplate, or a Resolution (used as it is);
    None resolves by the chain."""
    if isinstance(template, Resolution):
        return template
    if template is not None and (not isinstance(template, str) or template not in TEMPLATES):
        from chatlab.render.io import load_template

        return load_template(template).resolve(tokenizer)
    if template:
        return builtin_resolution(tokenizer, template, "explicit", f"the template {template!r} was named explicitly")
    who = identity_of(tokenizer, model_name)
    for pattern, name, why in MODEL_RENDERERS:
        if re.search(pattern, who, re.IGNORECASE):
            return builtin_resolution(tokenizer, name, "model-renderer", why)
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, dict):  # several named templates: the default one
        source = source.get("default")
    if isinstance(source, str) and source.strip():
        return Resolution("tokenizer-template", "the tokenizer ships a chat_template; it is rendered in "
                          "the sandbox and encoded so that content never becomes control ids",
                          "tokenizer", tokenizer, chat_template=source, tool_format=format_of_chat_template(source))
    found = by_model_type(who)
    if found:
        hint, name = found
        return builtin_resolution(tokenizer, name, "model-type",
                                  f"no chat_template; the model name/type mentions {hint!r}")
    return builtin_resolution(tokenizer, "chatml", "chatml-fallback",
                              "no explicit template, no model renderer, no chat_template and no known "
                              "model type: ChatML is the common default")


def render_ids(tokenizer: HFTokenizer, messages: Jsonable, tools: Jsonable = None,
               add_generation_prompt: bool = True, *, template: "TemplateChoice" = None,
               model_name: str | None = None, **options: Jsonable) -> Rendered:
    """Resolve, then render: the one-call form."""
    return resolve(tokenizer, model_name, template).render(messages, tools, add_generation_prompt, **options)
