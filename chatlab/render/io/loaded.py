"""Load a chat template from anywhere: a built-in name, a file in one of four formats, or text.

    t = load_template("data/templates/chatml-with-system.llamafactory.json")
    t.fmt, t.default_system, t.stop_words
    t.resolve(tokenizer).render(messages).ids      # id level, rule "explicit"

Formats: "jinja" (a Hugging Face chat_template file, or a tokenizer_config.json holding one),
"lmdeploy" (its JSON config), "ollama" (a Modelfile), "llamafactory" (slot JSON). The format is
taken from `fmt`, else from the file name, else from the content. A Jinja template renders
through the sandboxed Jinja path; the slot formats become a chatlab Template; a Modelfile renders
through the Go-template subset evaluator.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from chatlab.errors import ChatlabError
from chatlab.render.builtin import TEMPLATES, get_template
from chatlab.render.template import Template

FORMATS = ("jinja", "lmdeploy", "ollama", "llamafactory")


@dataclass
class LoadedTemplate:
    name: str
    fmt: str  # "builtin" or one of FORMATS
    default_system: str | None = None
    stop_words: list[str] = field(default_factory=list)
    template: Template | None = field(default=None, repr=False)  # builtin, lmdeploy, llamafactory
    jinja: str | None = field(default=None, repr=False)
    modelfile: Any = field(default=None, repr=False)  # ollama.Modelfile
    source: str | None = None  # the file it came from

    def resolve(self, tokenizer: Any) -> Any:
        """A chatlab Resolution (rule "explicit") that renders this template at id level."""
        from chatlab.render.resolution import Resolution
        from chatlab.tools.formats import format_of_chat_template

        why = f"the template {self.name!r} was named explicitly ({self.fmt}" + (
            f" from {self.source})" if self.source else ")")
        if self.template is not None:
            return Resolution("explicit", why, self.name, tokenizer, template=self.template,
                              tool_format=self.template.tool_format)
        if self.jinja is not None:
            return Resolution("explicit", why, self.name, tokenizer, chat_template=self.jinja,
                              tool_format=format_of_chat_template(self.jinja))
        from chatlab.render.io.ollama import render_modelfile

        return Resolution("explicit", why, self.name, tokenizer, renderer=partial(render_modelfile, self.modelfile),
                          stop_strings=tuple(self.stop_words))


def _stops(t: Template) -> list[str]:
    return list(dict.fromkeys([*t.stop_words, *(s for s in t.stop_tokens if s != "eos")]))


def from_template(t: Template, fmt: str, source: str | None = None) -> LoadedTemplate:
    return LoadedTemplate(t.name, fmt, t.default_system, _stops(t), template=t, source=source)


def detect(path: Path, text: str) -> str:
    """The format of a template file: by name first, then by content."""
    name = path.name.lower()
    if name.endswith((".jinja", ".j2", ".jinja2")):
        return "jinja"
    if name == "modelfile" or name.endswith(".modelfile") or name.startswith("modelfile."):
        return "ollama"
    stripped = text.lstrip()
    if stripped.startswith("{") and (name.endswith(".json") or stripped.rstrip().endswith("}")):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            if "chat_template" in data:
                return "jinja"  # a tokenizer_config.json
            if "format_user" in data or "format_assistant" in data:
                return "llamafactory"
            if "model_name" in data or {"meta_instruction", "eoh", "eoa", "eosys"} & set(data):
                return "lmdeploy"
    first = next((x.split()[0].upper() for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")), "")
    if first in ("FROM", "TEMPLATE"):
        return "ollama"
    if "{%" in text or "messages" in text and "{{" in text:
        return "jinja"
    raise ChatlabError(f"{path} is none of the template formats chatlab reads (Jinja chat_template, "
                       "LMDeploy JSON, Ollama Modelfile, LLaMA-Factory slot JSON); name it *.jinja / "
                       "Modelfile / *.json or pass --template-format jinja|lmdeploy|ollama|llamafactory")


def parse(text: str, fmt: str, origin: str, name: str) -> LoadedTemplate:
    if fmt == "jinja":
        from chatlab.render.jinja_safe import compile_template

        try:
            data = json.loads(text) if text.lstrip().startswith("{") and "chat_template" in text else None
        except ValueError:
            data = None
        if isinstance(data, dict) and "chat_template" in data:  # tokenizer_config.json
            text = data["chat_template"]
            if isinstance(text, list):  # several named templates: the default one
                text = next((t.get("template") for t in text if t.get("name") == "default"), None)
            if not isinstance(text, str):
                raise ChatlabError(f"{origin}: chat_template is not a string (nor a list with a 'default' one)")
        compile_template(text)  # a syntax error is reported now, with its line
        return LoadedTemplate(name, "jinja", jinja=text, source=origin)
    if fmt == "lmdeploy":
        from chatlab.render.io.lmdeploy import parse_lmdeploy

        t, data = parse_lmdeploy(text, origin)
        return LoadedTemplate(t.name, fmt, t.default_system, list(data.get("stop_words") or []),
                              template=t, source=origin)
    if fmt == "llamafactory":
        from chatlab.render.io.llamafactory import parse_llamafactory

        t = parse_llamafactory(text, origin)
        return LoadedTemplate(t.name, fmt, t.default_system, _stops(t), template=t, source=origin)
    from chatlab.render.io.ollama import parse_modelfile

    mf = parse_modelfile(text, origin)
    return LoadedTemplate(name, "ollama", mf.system, list(mf.stops), modelfile=mf, source=origin)


def load_template(source: Any, fmt: str | None = None) -> LoadedTemplate:
    """`source`: a LoadedTemplate, a built-in name, a file path, or (with `fmt`) the text itself."""
    if isinstance(source, LoadedTemplate):
        return source
    if isinstance(source, Template):
        return from_template(source, "builtin")
    if fmt is not None and fmt not in FORMATS:
        raise ChatlabError(f"unknown template format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not isinstance(source, (str, Path)):
        raise ChatlabError(f"a template is a built-in name, a file path or a LoadedTemplate, not {type(source).__name__}")
    if isinstance(source, str) and source in TEMPLATES and fmt is None:
        return from_template(get_template(source), "builtin")
    path = Path(source)
    try:  # text passed with fmt is not a path (and may be too long to be one)
        is_file = "\n" not in str(source) and path.is_file()
    except OSError:
        is_file = False
    if not is_file:
        if fmt is not None and isinstance(source, str):
            return parse(source, fmt, "<text>", fmt)
        raise ChatlabError(f"{str(source)[:80]!r} is neither a built-in template ({', '.join(TEMPLATES)}) nor "
                           "an existing file; pass a template name or the path to a template file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ChatlabError(f"cannot read template file {path} ({err}); pass a UTF-8 text file") from None
    return parse(text, fmt or detect(path, text), path.name, path.stem)  # no machine path in outputs
