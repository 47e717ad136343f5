"""The template-file formats, one reader/writer object each, in one registry.

`TEMPLATE_FORMATS[name]` says how a format is recognised (file name, then content), read (text
-> a LoadedTemplate) and written (a chatlab Template -> text; None where chatlab does not write
it). The CLI's choices, load_template, detect and export_template all come from here, so a new
format is one entry, not a branch in each.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.io.lmdeploy import export_lmdeploy
from chatlab.render.io.ollama import export_ollama
from chatlab.render.io.readers import (LoadedTemplate, json_object, read_jinja, read_llamafactory, read_lmdeploy,
                                       read_ollama, write_jinja)
from chatlab.render.template import Template

MAX_BYTES = 8 * 1024 * 1024  # a tokenizer_config.json with its vocabulary notes is < 8 MB; refused before reading


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # for messages: "an Ollama Modelfile"
    read: Callable[[str, str, str], LoadedTemplate]  # (text, origin, name)
    writer: Callable[[Template, bool], str] | None = None  # (template, drop_tools)
    names: Callable[[str], bool] = lambda name: False  # a file name that says this format
    content: Callable[[str, Jsonable], bool] = lambda text, data: False  # (text, its JSON object or None)

    def write(self, template: Template, drop_tools: bool = False) -> str:
        if self.writer is None:
            raise ChatlabError(f"chatlab does not write {self.what} files; export to one of {', '.join(EXPORT_TARGETS)}")
        return self.writer(template, drop_tools)


def _first_word(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")), "")
    return line.split()[0].upper() if line.split() else ""


_ALL = [
    Format("jinja", "a Jinja chat_template", read_jinja, write_jinja,
           names=lambda n: n.endswith((".jinja", ".j2", ".jinja2")),
           content=lambda text, data: (isinstance(data, dict) and "chat_template" in data)
           or (data is None and ("{%" in text or "messages" in text and "{{" in text)
               and _first_word(text) not in ("FROM", "TEMPLATE"))),
    Format("lmdeploy", "an LMDeploy JSON config", read_lmdeploy, export_lmdeploy,
           content=lambda text, data: isinstance(data, dict) and not {"format_user", "format_assistant"} & set(data)
           and ("model_name" in data or bool({"meta_instruction", "eoh", "eoa", "eosys"} & set(data)))),
    Format("ollama", "an Ollama Modelfile", read_ollama, export_ollama,
           names=lambda n: n == "modelfile" or n.endswith(".modelfile") or n.startswith("modelfile."),
           content=lambda text, data: data is None and _first_word(text) in ("FROM", "TEMPLATE")),
    Format("llamafactory", "a LLaMA-Factory slot JSON", read_llamafactory,
           content=lambda text, data: isinstance(data, dict) and ("format_user" in data or "format_assistant" in data)),
]
TEMPLATE_FORMATS: dict[str, Format] = {f.name: f for f in _ALL}
EXPORT_TARGETS = tuple(f.name for f in _ALL if f.writer)


def get_format(name: str) -> Format:
    if name not in TEMPLATE_FORMATS:
        raise ChatlabError(f"unknown template format {name!r}; use one of {', '.join(TEMPLATE_FORMATS)}")
    return TEMPLATE_FORMATS[name]


def detect(path: Path, text: str) -> str:
    """The format of a template file: by name first, then by content."""
    name = path.name.lower()
    for f in _ALL:
        if f.names(name):
            return f.name
    data = json_object(text) if name.endswith(".json") or text.rstrip().endswith("}") else None
    for f in _ALL:
        if f.content(text, data):
            return f.name
    raise ChatlabError(f"{path} is none of the template formats chatlab reads "
                       f"({'; '.join(f.what for f in _ALL)}); name it *.jinja / Modelfile / *.json or pass "
                       f"--template-format {'|'.join(TEMPLATE_FORMATS)}")
