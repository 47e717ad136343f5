"""The template-file formats, one reader/writer object each, in one registry.

`FORMATS[name]` says how a format is recognised (file name, then content), read (text -> a
LoadedTemplate), written (a chatlab Template -> text; None where chatlab does not write it) and
whether the engine adds the tokenizer's bos itself. The CLI's choices, load_template, detect and
export_template all come from here, so a new format is one entry, not a branch in each.
Readers and writers import their module on use: listing the formats stays cheap.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Callable

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.template import Template

MAX_BYTES = 8 * 1024 * 1024  # a tokenizer_config.json with its vocabulary notes is < 8 MB; refused before reading


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # for messages: "an Ollama Modelfile"
    reader: str  # "module:function" taking (text, origin, name) -> LoadedTemplate
    writer: str | None = None  # "module:function" taking (Template, drop_tools) -> text
    names: Callable[[str], bool] = lambda name: False  # a file name that says this format
    content: Callable[[str, Jsonable], bool] = lambda text, data: False  # (text, its JSON object or None)
    engine_bos: str | None = None  # the engine's tokenizer call adds the bos (Resolution.engine_bos)

    def read(self, text: str, origin: str, name: str) -> object:
        return _load(self.reader)(text, origin, name)  # a LoadedTemplate (loaded.py checks it)

    def write(self, template: Template, drop_tools: bool = False) -> str:
        if self.writer is None:
            raise ChatlabError(f"chatlab does not write {self.what} files; export to one of {', '.join(TARGETS)}")
        return str(_load(self.writer)(template, drop_tools))


def _load(ref: str) -> Callable[..., object]:
    module, _, fn = ref.partition(":")
    return getattr(import_module(f"chatlab.render.io.{module}"), fn)


def _is_modelfile_name(name: str) -> bool:
    return name == "modelfile" or name.endswith(".modelfile") or name.startswith("modelfile.")


def _first_word(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")), "")
    return line.split()[0].upper() if line.split() else ""


_ALL = [
    Format("jinja", "a Jinja chat_template", "readers:read_jinja", "readers:write_jinja",
           names=lambda n: n.endswith((".jinja", ".j2", ".jinja2")),
           content=lambda text, data: (isinstance(data, dict) and "chat_template" in data)
           or (data is None and ("{%" in text or "messages" in text and "{{" in text)
               and _first_word(text) not in ("FROM", "TEMPLATE"))),
    Format("lmdeploy", "an LMDeploy JSON config", "readers:read_lmdeploy", "lmdeploy:export_lmdeploy",
           content=lambda text, data: isinstance(data, dict) and not {"format_user", "format_assistant"} & set(data)
           and ("model_name" in data or bool({"meta_instruction", "eoh", "eoa", "eosys"} & set(data))),
           engine_bos="lmdeploy"),
    Format("ollama", "an Ollama Modelfile", "readers:read_ollama", "ollama:export_ollama",
           names=_is_modelfile_name, content=lambda text, data: data is None and _first_word(text) in ("FROM", "TEMPLATE"),
           engine_bos="ollama"),
    Format("llamafactory", "a LLaMA-Factory slot JSON", "readers:read_llamafactory",
           content=lambda text, data: isinstance(data, dict) and ("format_user" in data or "format_assistant" in data)),
]
FORMATS: dict[str, Format] = {f.name: f for f in _ALL}
TARGETS = tuple(f.name for f in _ALL if f.writer)


def get_format(name: str) -> Format:
    if name not in FORMATS:
        raise ChatlabError(f"unknown template format {name!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[name]


def json_object(text: str) -> Jsonable:
    """The JSON object a file holds, or None (not JSON, or nested past any real config)."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


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
                       f"--template-format {'|'.join(FORMATS)}")
