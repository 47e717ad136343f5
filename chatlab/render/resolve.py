"""Which template a model gets, and why: the resolution chain of the RTP-LLM article, from a
template the user names to the ChatML fallback; `Resolution.rule` names the step that chose it."""
from __future__ import annotations

import re
from pathlib import Path

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.models.assets import ASSETS
from chatlab.render.compose import Resolution
from chatlab.render.encoder import Rendered
from chatlab.render.io.formats import load_template
from chatlab.render.template import TEMPLATES

# What `template=` takes: a built-in name, a file's path, or a Resolution (a loaded file's too)
TemplateChoice = str | Path | Resolution | None


def by_model_type(who: str) -> tuple[str, str] | None:
    """(hint, template name) of the most specific model-type hint in `who` ("qwen3" before "qwen")."""
    hints = sorted(((h, t.name) for t in TEMPLATES.values() for h in t.model_types), key=lambda x: -len(x[0]))
    lowered = who.lower()
    return next(((h, n) for h, n in hints if h in lowered), None)


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
    """`template`: a built-in name, a template file (chatlab.render.io), or a Resolution (given
    `tokenizer` if it has none); None resolves by the chain."""
    if isinstance(template, Resolution):
        return template if template.tokenizer is not None else template.for_tokenizer(tokenizer)
    if template is not None and (not isinstance(template, str) or template not in TEMPLATES):
        return load_template(template).for_tokenizer(tokenizer)
    if template:
        return Resolution.builtin(tokenizer, template, "explicit", f"the template {template!r} was named explicitly")
    who = " ".join(filter(None, [model_name, str(getattr(tokenizer, "name_or_path", "") or ""),
                                 type(tokenizer).__name__]))
    for pattern, name, why in MODEL_RENDERERS:
        if re.search(pattern, who, re.IGNORECASE):
            return Resolution.builtin(tokenizer, name, "model-renderer", why)
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, dict):  # several named templates: the default one
        source = source.get("default")
    if isinstance(source, str) and source.strip():
        asset = ASSETS.get(model_name or "")
        return Resolution("tokenizer-template", "the tokenizer ships a chat_template; it is rendered in "
                          "the sandbox and encoded so that content never becomes control ids",
                          "tokenizer", tokenizer, chat_template=source, fmt="jinja",
                          tools_template=(asset.tool_template or None) if asset else None)
    found = by_model_type(who)
    if found:
        hint, name = found
        return Resolution.builtin(tokenizer, name, "model-type",
                                  f"no chat_template; the model name/type mentions {hint!r}")
    return Resolution.builtin(tokenizer, "chatml", "chatml-fallback",
                              "no explicit template, no model renderer, no chat_template and no known "
                              "model type: ChatML is the common default")


def render_ids(tokenizer: HFTokenizer, messages: Jsonable, tools: Jsonable = None,
               add_generation_prompt: bool = True, *, template: "TemplateChoice" = None,
               model_name: str | None = None, **options: Jsonable) -> Rendered:
    """Resolve, then render: the one-call form."""
    return resolve(tokenizer, model_name, template).render(messages, tools, add_generation_prompt, **options)
