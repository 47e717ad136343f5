"""`export_template(name_or_loaded, fmt)`: a template written for another engine.

jinja: vLLM `--chat-template`, llama.cpp `--jinja --chat-template-file`, openvino-genai, or
tokenizer_config's chat_template (chatlab.render.io.jinja_writer writes every Template rule as Jinja);
lmdeploy: `lmdeploy serve api_server --chat-template FILE.json`; ollama: a Modelfile for
`ollama create`. Anything a target cannot express is refused with CannotExpress, naming the
construct and the format.
"""
from __future__ import annotations

from pathlib import Path

from chatlab.errors import CannotExpress, ChatlabError
from chatlab.render.io.loaded import LoadedTemplate, load_template
from chatlab.render.io.registry import EXPORT_TARGETS, get_format

def export_template(name_or_loaded: "str | Path | LoadedTemplate", fmt: str = "jinja", *,
                    drop_tools: bool = False) -> str:
    """The template as text in `fmt`; `drop_tools` exports a tool-capable template's chat layout
    to a format that has no tool support (its tool calls and results are then not rendered)."""
    if fmt not in EXPORT_TARGETS:
        raise ChatlabError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_TARGETS)}")
    loaded = load_template(name_or_loaded)
    if loaded.template is not None:
        return get_format(fmt).write(loaded.template, drop_tools)
    if loaded.fmt == fmt:  # a Jinja file as Jinja, a Modelfile as a Modelfile: unchanged
        if fmt == "jinja":
            return loaded.jinja or ""
        if loaded.source and loaded.source != "<text>":
            with open(loaded.source, encoding="utf-8") as f:
                return f.read()
    raise CannotExpress(f"{loaded.name!r} is a {loaded.fmt} template, which chatlab renders but cannot "
                        f"convert to {fmt} (it is code, not slots); export a built-in, LMDeploy or "
                        "LLaMA-Factory template instead, or use the file as it is",
                        f"a {loaded.fmt} template (code, not slots)", fmt)
