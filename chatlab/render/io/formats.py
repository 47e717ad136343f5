"""The template-file formats, each a reader and maybe a writer, in one registry: `load_template`
reads a template (a Resolution without a tokenizer), `export_template` writes one out. A file's
format is `fmt`, else its name's, else its content's."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chatlab._thirdparty import Jsonable
from chatlab.errors import CannotExpress, ChatlabError
from chatlab.render.compose import Resolution
from chatlab.render.io.jinja_writer import Exporter
from chatlab.render.io.llamafactory import parse_llamafactory
from chatlab.render.io.lmdeploy import export_lmdeploy, parse_lmdeploy
from chatlab.render.io.ollama import Modelfile, export_ollama, parse_modelfile
from chatlab.render.jinja import compile_template
from chatlab.render.template import TEMPLATES, Template, get_template

MAX_BYTES = 8 * 1024 * 1024  # a tokenizer_config.json with its vocabulary notes is < 8 MB; refused before reading


def loaded(name: str, fmt: str, source: str | None, template: Template | None = None, chat_template: str | None = None,
           modelfile: Modelfile | None = None, engine_bos: str | None = None, notes: list[str] | None = None) -> Resolution:
    """A template read from `source` in `fmt`, not yet rendering for any tokenizer."""
    why = f"the template {name!r} was named explicitly ({fmt}" + (f" from {source})" if source else ")")
    return Resolution("explicit", why, name, None, template, chat_template, modelfile, engine_bos,
                      fmt=fmt, source=source, notes=notes or [])


def json_object(text: str) -> Jsonable:
    """The JSON object a file holds, or None (not JSON, or nested past any real config)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _nonempty(text: str, origin: str, what: str) -> None:
    if not text.strip():
        raise ChatlabError(f"{origin} is empty; {what} needs a template (it would render every chat as no tokens)")


def read_jinja(text: str, origin: str, name: str) -> Resolution:
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
    return loaded(name, "jinja", origin, chat_template=text)


def read_lmdeploy(text: str, origin: str, name: str) -> Resolution:
    t = parse_lmdeploy(text, origin)
    return loaded(t.name, "lmdeploy", origin, template=t, engine_bos="lmdeploy")


def read_llamafactory(text: str, origin: str, name: str) -> Resolution:
    t, notes = parse_llamafactory(text, origin)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return loaded(t.name, "llamafactory", origin, template=t, notes=notes)


def read_ollama(text: str, origin: str, name: str) -> Resolution:
    mf = parse_modelfile(text, origin)
    if not mf.template.strip():
        raise ChatlabError(f"{origin}: the TEMPLATE is empty; Ollama would send the bare content. "
                           'Write the prompt layout in TEMPLATE """…"""')
    return loaded(name, "ollama", origin, modelfile=mf, engine_bos="ollama")


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # for messages: "an Ollama Modelfile"
    read: Callable[[str, str, str], Resolution]  # (text, origin, name)
    writer: Callable[[Template, bool], str] | None = None  # (template, drop_tools)
    names: Callable[[str], bool] = lambda name: False  # a file name that says this format
    content: Callable[[str, Jsonable], bool] = lambda text, data: False  # (text, its JSON object or None)


def _first_word(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")), "")
    return line.split()[0].upper() if line.split() else ""


_ALL = [
    Format("jinja", "a Jinja chat_template", read_jinja, lambda t, drop_tools: Exporter(t).render(),
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


def load_template(source: "str | Path | Resolution | Template", fmt: str | None = None) -> Resolution:
    """`source`: a Resolution, a built-in name, a file path, or (with `fmt`) the text itself."""
    if isinstance(source, Resolution):
        return source
    if isinstance(source, Template):
        return loaded(source.name, "builtin", None, template=source)
    if fmt is not None:
        get_format(fmt)  # an unknown format: the list of known ones
    if not isinstance(source, (str, Path)):
        raise ChatlabError(f"a template is a built-in name, a file path or a loaded template, not {type(source).__name__}")
    if isinstance(source, str) and source in TEMPLATES and fmt is None:
        return loaded(source, "builtin", None, template=get_template(source))
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


def export_template(name_or_loaded: "str | Path | Resolution", fmt: str = "jinja", *, drop_tools: bool = False) -> str:
    """The template as text in `fmt`; `drop_tools` exports a tool template's chat layout alone.
    What a format cannot express is refused with CannotExpress, naming the construct."""
    writer = TEMPLATE_FORMATS[fmt].writer if fmt in TEMPLATE_FORMATS else None
    if writer is None:
        raise ChatlabError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_TARGETS)}")
    t = load_template(name_or_loaded)
    if t.template is not None:
        return writer(t.template, drop_tools)
    if t.fmt == fmt:  # a Jinja file as Jinja, a Modelfile as a Modelfile: unchanged
        if fmt == "jinja":
            return t.chat_template or ""
        if isinstance(t.modelfile, Modelfile):  # its source names the file, not where it is: keep the text
            return t.modelfile.text
    raise CannotExpress(f"{t.name!r} is a {t.fmt} template, which chatlab renders but cannot "
                        f"convert to {fmt} (it is code, not slots); export a built-in, LMDeploy or "
                        "LLaMA-Factory template instead, or use the file as it is",
                        f"a {t.fmt} template (code, not slots)", fmt)
