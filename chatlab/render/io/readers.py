"""What a template file reads into (LoadedTemplate), and each format's reader and the Jinja writer.

Every reader refuses an empty template (it would render every chat as no tokens).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.io.flat import stop_strings
from chatlab.render.io.jinja_writer import Exporter
from chatlab.render.io.llamafactory import parse_llamafactory
from chatlab.render.io.lmdeploy import parse_lmdeploy
from chatlab.render.io.ollama import Modelfile, parse_modelfile
from chatlab.render.jinja_safe import compile_template
from chatlab.render.template import Template


@dataclass
class LoadedTemplate:
    name: str
    fmt: str  # "builtin" or a name in TEMPLATE_FORMATS
    default_system: str | None = None
    stop_words: list[str] = field(default_factory=list)
    template: Template | None = field(default=None, repr=False)  # builtin, lmdeploy, llamafactory
    jinja: str | None = field(default=None, repr=False)
    modelfile: "Modelfile | None" = field(default=None, repr=False)
    source: str | None = None  # the file it came from
    # The engine whose own tokenizer call adds the bos id (Resolution.engine_bos): "lmdeploy", "ollama"
    engine_bos: str | None = None
    notes: list[str] = field(default_factory=list)  # what the reader warns about (also warnings.warn)


def from_template(t: Template, fmt: str, source: str | None = None) -> LoadedTemplate:
    return LoadedTemplate(t.name, fmt, t.default_system, stop_strings(t), template=t, source=source)


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


def _nonempty(text: str, origin: str, what: str) -> None:
    if not text.strip():
        raise ChatlabError(f"{origin} is empty; {what} needs a template (it would render every chat as no tokens)")


def read_jinja(text: str, origin: str, name: str) -> LoadedTemplate:
    _nonempty(text, origin, "a Jinja chat_template file")
    data = json_object(text) if "chat_template" in text else None
    if isinstance(data, dict) and "chat_template" in data:  # tokenizer_config.json
        text = data["chat_template"]
        if isinstance(text, list):  # several named templates: the default one
            text = next((t.get("template") for t in text if isinstance(t, dict) and t.get("name") == "default"), None)
        if not isinstance(text, str):
            raise ChatlabError(f"{origin}: chat_template is not a string (nor a list with a 'default' one)")
        _nonempty(text, origin + " chat_template", "a tokenizer_config.json")
    compile_template(text)  # a syntax error is reported now, with its line
    return LoadedTemplate(name, "jinja", jinja=text, source=origin)


def write_jinja(template: Template, drop_tools: bool = False) -> str:
    return Exporter(template).render()


def read_lmdeploy(text: str, origin: str, name: str) -> LoadedTemplate:
    t, data = parse_lmdeploy(text, origin)
    return LoadedTemplate(t.name, "lmdeploy", t.default_system, list(data.get("stop_words") or []),
                          template=t, source=origin, engine_bos="lmdeploy")


def read_llamafactory(text: str, origin: str, name: str) -> LoadedTemplate:
    t, notes = parse_llamafactory(text, origin)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return LoadedTemplate(t.name, "llamafactory", t.default_system, stop_strings(t), template=t,
                          source=origin, notes=notes)


def read_ollama(text: str, origin: str, name: str) -> LoadedTemplate:
    mf = parse_modelfile(text, origin)
    if not mf.template.strip():
        raise ChatlabError(f"{origin}: the TEMPLATE is empty; Ollama would send the bare content. "
                           'Write the prompt layout in TEMPLATE """…"""')
    return LoadedTemplate(name, "ollama", mf.system, list(mf.stops), modelfile=mf, source=origin,
                          engine_bos="ollama")
