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

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab._thirdparty import HFTokenizer
from chatlab.errors import ChatlabError
from chatlab.render.builtin import TEMPLATES, get_template
from chatlab.render.template import Template

from chatlab.render.io.registry import FORMATS as REGISTRY
from chatlab.render.io.registry import MAX_BYTES, get_format

if TYPE_CHECKING:
    from chatlab.render.io.ollama import Modelfile
    from chatlab.render.resolution import Resolution

FORMATS = tuple(REGISTRY)  # the format names (chatlab.render.io.FORMATS)


@dataclass
class LoadedTemplate:
    name: str
    fmt: str  # "builtin" or one of FORMATS
    default_system: str | None = None
    stop_words: list[str] = field(default_factory=list)
    template: Template | None = field(default=None, repr=False)  # builtin, lmdeploy, llamafactory
    jinja: str | None = field(default=None, repr=False)
    modelfile: "Modelfile | None" = field(default=None, repr=False)
    source: str | None = None  # the file it came from
    notes: list[str] = field(default_factory=list)  # what the reader warns about (also warnings.warn)

    def resolve(self, tokenizer: HFTokenizer) -> "Resolution":
        """A chatlab Resolution (rule "explicit") that renders this template at id level."""
        from chatlab.render.resolution import Resolution
        from chatlab.tools.formats import format_of_chat_template

        why = f"the template {self.name!r} was named explicitly ({self.fmt}" + (
            f" from {self.source})" if self.source else ")")
        if self.template is not None:
            return Resolution("explicit", why, self.name, tokenizer, template=self.template,
                              tool_format=self.template.tool_format,
                              engine_bos=REGISTRY[self.fmt].engine_bos if self.fmt in REGISTRY else None)
        if self.jinja is not None:
            return Resolution("explicit", why, self.name, tokenizer, chat_template=self.jinja,
                              tool_format=format_of_chat_template(self.jinja))
        from chatlab.render.io.ollama import render_modelfile

        assert self.modelfile is not None  # the Ollama reader sets it
        return Resolution("explicit", why, self.name, tokenizer, renderer=partial(render_modelfile, self.modelfile),
                          stop_strings=tuple(self.stop_words), engine_bos=REGISTRY["ollama"].engine_bos)


def stops_of_template(t: Template) -> list[str]:
    return list(dict.fromkeys([*t.stop_words, *(s for s in t.stop_tokens if s != "eos")]))


def from_template(t: Template, fmt: str, source: str | None = None) -> LoadedTemplate:
    return LoadedTemplate(t.name, fmt, t.default_system, stops_of_template(t), template=t, source=source)


def detect(path: Path, text: str) -> str:
    """The format of a template file: by name first, then by content (the registry's rules)."""
    from chatlab.render.io.registry import detect as by_registry

    return by_registry(path, text)


def parse(text: str, fmt: str, origin: str, name: str) -> LoadedTemplate:
    """Text in format `fmt` through that format's reader; nesting past Python's stack (3,000
    levels of Jinja blocks, JSON arrays) is refused with the format named, never a traceback."""
    from chatlab.render.io.registry import get_format

    f = get_format(fmt)
    try:
        loaded = f.read(text, origin, name)
        assert isinstance(loaded, LoadedTemplate)  # every format's reader makes one
        return loaded
    except RecursionError:
        raise ChatlabError(f"{origin} nests too deeply to be {f.what} (thousands of levels); real templates "
                           "nest a few: fix the file") from None


def load_template(source: "str | Path | LoadedTemplate", fmt: str | None = None) -> LoadedTemplate:
    """`source`: a LoadedTemplate, a built-in name, a file path, or (with `fmt`) the text itself."""
    if isinstance(source, LoadedTemplate):
        return source
    if isinstance(source, Template):
        return from_template(source, "builtin")
    if fmt is not None:
        get_format(fmt)  # an unknown format: the list of known ones
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
            if len(source) > MAX_BYTES:
                raise ChatlabError(f"the template text is {len(source) // 2**20} MB; a chat template is a few "
                                   f"KB (the limit is {MAX_BYTES // 2**20} MB): pass the template, not the model")
            return parse(source, fmt, "<text>", fmt)
        raise ChatlabError(f"{str(source)[:80]!r} is neither a built-in template ({', '.join(TEMPLATES)}) nor "
                           "an existing file; pass a template name or the path to a template file")
    size = path.stat().st_size
    if size > MAX_BYTES:  # checked before reading: a weights file passed by mistake is not read
        raise ChatlabError(f"{path.name} is {size // 2**20} MB; a template file is a few KB (the limit is "
                           f"{MAX_BYTES // 2**20} MB): pass the template file, not a model file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ChatlabError(f"cannot read template file {path} ({err}); pass a UTF-8 text file") from None
    return parse(text, fmt or detect(path, text), path.name, path.stem)  # no machine path in outputs
