"""Load a chat template from anywhere: a built-in name, a file in one of four formats, or text.

    t = load_template("data/templates/chatml-with-system.llamafactory.json")
    t.fmt, t.default_system, t.stop_words
    resolve(tokenizer, template=t).render(messages).ids   # chatlab.render.resolve; rule "explicit"

Formats: "jinja" (a Hugging Face chat_template file, or a tokenizer_config.json holding one),
"lmdeploy" (its JSON config), "ollama" (a Modelfile), "llamafactory" (slot JSON). The format is
taken from `fmt`, else from the file name, else from the content. A Jinja template renders
through the sandboxed Jinja path; the slot formats become a chatlab Template; a Modelfile renders
through the Go-template subset evaluator.
"""
from __future__ import annotations

from pathlib import Path

from chatlab.errors import ChatlabError
from chatlab.render.builtin import TEMPLATES, get_template
from chatlab.render.io.readers import LoadedTemplate, from_template
from chatlab.render.io.registry import MAX_BYTES, detect, get_format
from chatlab.render.template import Template


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
            return get_format(fmt).read(source, "<text>", fmt)
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
    # no machine path in outputs; each reader refuses nesting past any real template itself
    return get_format(fmt or detect(path, text)).read(text, path.name, path.stem)
