"""LLaMA-Factory slot templates written as JSON (its formatter names), imported as a Template.
format_separator ends the assistant turn (the same ids for every chat that ends with a user turn).
A name LLaMA-Factory registers with a class is read with that class, from its installed
data/template.py (parsed, not imported), else from TABLE."""
from __future__ import annotations

import ast
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.io.flat import json_config, stops_of
from chatlab.render.template import BOS, CONTENT, EOS, SEAM, Part, Parts, S, T, Template

FIELDS = ("name", "format_user", "format_assistant", "format_system", "format_separator",
          "format_prefix", "default_system", "stop_words", "template_class")
# The base Template writes the system block before the first user turn; Llama2Template inside it.
CLASSES = ("default", "llama2")
BASE = "Template"
# The names LLaMA-Factory 0.9.5 registers with a class other than the base Template.
_LLAMA2 = ("gemma gemma2 gemma3 gemma3n llama2 llama2_zh llava_next_mistral llava_next_video_mistral ministral "
           "ministral3 mistral paligemma paligemma_chat pixtral")
_REASONING = ("deepseekr1 ernie_vl gemma4 gemma4n glm4_5v glm4_moe glm4v glmz1 gpt_oss hy3 keye_vl kimi_vl mimo "
              "mimo_v2 mimo_vl minimax2 qwen3 qwen3_5 qwen3_6 qwen3_omni qwen3_vl seed_oss youtu")
TABLE: dict[str, str] = {**dict.fromkeys(_LLAMA2.split(), "Llama2Template"),
                         **dict.fromkeys(_REASONING.split(), "ReasoningTemplate"),
                         **dict.fromkeys(("aeva", "glm4_7"), "Glm47ReasoningTemplate")}
# LLaMA-Factory's classes as chatlab's template_class; the reasoning ones render the base
# class's prompt for chats without reasoning (their thought handling is not imported).
AS_CHATLAB = {BASE: "default", "Llama2Template": "llama2", "ReasoningTemplate": "default",
              "Glm47ReasoningTemplate": "default"}


def registry_file() -> Path | None:
    """LLaMA-Factory's data/template.py where the package is installed, or None."""
    spec = importlib.util.find_spec("llamafactory")  # finds without importing
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    roots.append(str(Path(os.environ.get("CHATLAB_ORACLE_SITE") or Path.home() / ".cache" / "chatlab-oracles")
                     / "llamafactory"))
    return next((Path(r) / "data" / "template.py" for r in roots if (Path(r) / "data" / "template.py").is_file()), None)


def read_registry(path: Path) -> dict[str, str]:
    """name -> class name of every `register_template(name=..., template_class=...)` call."""
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "register_template"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        name, cls = kw.get("name"), kw.get("template_class")
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            out[name.value] = cls.id if isinstance(cls, ast.Name) else BASE
    return out


@lru_cache(maxsize=1)
def registered() -> tuple[dict[str, str], str]:
    """(name -> class, where it was read from): LLaMA-Factory's registry, or TABLE (non-base names only)."""
    path = registry_file()
    try:
        found = read_registry(path) if path is not None else {}
    except (OSError, SyntaxError, ValueError):
        found = {}
    if found:
        return found, "read from its installed data/template.py"
    return dict(TABLE), "from chatlab's table of LLaMA-Factory 0.9.5"


def class_note(name: str, given: str | None) -> tuple[str, str | None]:
    """(the chatlab template_class to read a file with, a warning or None). `given` is the file's
    template_class (None: not given)."""
    classes, where = registered()
    lf = classes.get(name)
    if lf is None or lf not in AS_CHATLAB:  # a name of the user's own, or a class chatlab does not know
        return given or "default", None
    cls = AS_CHATLAB[lf]
    if given == cls and lf in (BASE, "Llama2Template") or given is None and lf == BASE:
        return cls, None
    said = "gives no template_class" if given is None else f"says template_class {given!r}"
    head = f"LLaMA-Factory registers template {name!r} as {lf} ({where}), and the file {said}"
    if lf not in (BASE, "Llama2Template"):
        return cls, (f"{head}: read with the base class, as {lf} renders chats without reasoning; its "
                     "reasoning handling (thought words, earlier thoughts removed) is not imported")
    what = "the system text inside the first user turn" if cls == "llama2" else "the system block before the first user turn"
    return cls, (f"{head}: read with template_class {cls!r} ({what}), as LLaMA-Factory renders it. Write "
                 f"\"template_class\": {json.dumps(cls)} to say so, or rename the template if it is not LLaMA-Factory's")


def _slots(value: Jsonable, field: str, origin: str, content: bool) -> Parts:
    """One formatter's slots as chatlab parts; `{{content}}` becomes CONTENT."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ChatlabError(f"{origin}: field {field!r} must be a list of slots (strings or "
                           '{"token": ...} objects), not ' + type(value).__name__)
    out: list[Part] = []
    for k, slot in enumerate(value):
        out.append(SEAM)  # _convert_elements_to_ids encodes each element on its own
        if isinstance(slot, str):
            if "{{" in slot.replace("{{content}}", ""):
                raise ChatlabError(f"{origin}: {field}[{k}] uses a placeholder other than {{{{content}}}} "
                                   "(e.g. {{idx}}), which chatlab does not import; write the text out")
            pieces = slot.split("{{content}}")
            for j, piece in enumerate(pieces):
                if piece:
                    out.append(T(piece))
                if j < len(pieces) - 1:
                    out.append(CONTENT)
        elif isinstance(slot, dict) and set(slot) == {"token"} and isinstance(slot["token"], str):
            out.append(S(slot["token"]))
        elif isinstance(slot, dict) and slot in ({"bos_token": True}, {"eos_token": True}):
            out.append(BOS if "bos_token" in slot else EOS)
        else:
            raise ChatlabError(f"{origin}: {field}[{k}] is {json.dumps(slot)[:60]}; a slot is a string, "
                               '{"token": "<special>"}, {"bos_token": true} or {"eos_token": true}')
    if out:
        out.append(SEAM)
    n = out.count(CONTENT)
    if content and n != 1:
        raise ChatlabError(f"{origin}: field {field!r} must contain {{{{content}}}} exactly once (found {n})")
    if not content and n:
        raise ChatlabError(f"{origin}: field {field!r} cannot contain {{{{content}}}}")
    return tuple(out)


def parse_llamafactory(text: str, origin: str = "<text>") -> tuple[Template, list[str]]:
    """The template, and warnings: a name LLaMA-Factory registers with another class than the
    file's is read with LLaMA-Factory's class, and said so."""
    data, unknown = json_config(text, origin, "LLaMA-Factory template",
                                "a LLaMA-Factory template is a JSON object with format_user, ...", FIELDS)
    if unknown:
        raise ChatlabError(f"{origin}: unknown field(s) {', '.join(map(repr, unknown))}; the fields are "
                           f"{', '.join(FIELDS)} (tool formats such as format_function are not imported)")
    for key in ("format_user", "format_assistant"):
        if key not in data:
            raise ChatlabError(f"{origin}: field {key!r} is required")
    default = data.get("default_system")
    if default is not None and not isinstance(default, str):
        raise ChatlabError(f"{origin}: field 'default_system' must be a string")
    words, tokens = stops_of(data, origin)
    given = data.get("template_class")
    if given is not None and given not in CLASSES:
        raise ChatlabError(f"{origin}: field 'template_class' must be one of {', '.join(CLASSES)} "
                           f"(LLaMA-Factory's Template / Llama2Template), not {given!r}")
    name = data.get("name")
    cls, note = class_note(name, given) if isinstance(name, str) and name else (given or "default", None)
    user = _slots(data["format_user"], "format_user", origin, True)
    assistant = _slots(data["format_assistant"], "format_assistant", origin, True)
    system = _slots(data.get("format_system", ["{{content}}"]), "format_system", origin, True)
    sep = _slots(data.get("format_separator", []), "format_separator", origin, False)
    prefix = _slots(data.get("format_prefix", []), "format_prefix", origin, False)
    # As _encode: an empty system message means the default, and an empty default is none; the
    # prompt ends where the last user slot ends. Llama2Template's system joins the user's content
    # inside the user element: no seams around it.
    merged = tuple(p for p in system if p != SEAM)
    style: dict[str, Jsonable] = {"system_style": "first-user", "system_merge": merged} if cls == "llama2" else {}
    t = Template(str(data.get("name") or origin), f"imported from {origin} (LLaMA-Factory slots)",
                 {"system": system, "user": user, "assistant": assistant + sep}, prefix=prefix,
                 generation_prompt=(), default_system=default or None, empty_system_default=True,
                 stop_words=words, stop_tokens=tokens, **style)
    return t, [f"{origin}: {note}"] if note else []

