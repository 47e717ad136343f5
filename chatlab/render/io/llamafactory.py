"""LLaMA-Factory-style slot templates written as data (JSON), imported as a chatlab Template.

LLaMA-Factory registers templates in Python as formatters with slots, e.g.
`format_user=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>assistant\\n"]`. The JSON
form here keeps those names: format_user, format_assistant (required), format_system,
format_separator, default_system, stop_words, format_prefix and template_class ("llama2" for
the Llama2Template family, whose system text goes inside the first user slot; a name LLaMA-Factory
registers with a class is read with that class, with a warning when the file says otherwise). A slot list holds strings (with
`{{content}}` once per role) and objects: {"token": "<|im_start|>"} for a special token,
{"bos_token": true} / {"eos_token": true} for the tokenizer's own. LLaMA-Factory's encoding
(template.py `_encode`): the prefix and the system (content or default_system) before the first
message, format_separator before every user turn but the first, the user slot usually ending
with the assistant header (so the reply opens there). Folding the separator into the end of the
assistant turn gives the same ids for every conversation that ends with a user turn.
"""
from __future__ import annotations

import json
from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.io.flat import json_config, stops_of
from chatlab.render.io.llamafactory_classes import class_note
from chatlab.render.template import BOS, CONTENT, EOS, SEAM, Part, Parts, S, T, Template

FIELDS = ("name", "format_user", "format_assistant", "format_system", "format_separator",
          "format_prefix", "default_system", "stop_words", "template_class")
# register_template(template_class=...): the base Template writes the system block before the
# first user turn; Llama2Template (llama2, mistral, gemma...) puts it inside the first user slot.
CLASSES = ("default", "llama2")


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
    file's (llamafactory_classes.py) is read with LLaMA-Factory's class, and said so."""
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
    # LLaMA-Factory's _encode: `system = system or default_system`, then a system block only when
    # there is text (`if system or tools`): so an empty system message means the default, and an
    # empty default is none. At inference the prompt ends where the last user slot ends (the
    # assistant slot is the response), hence no generation prompt of its own. Llama2Template
    # prepends format_system's text to the first user message's content, inside [INST].
    # (its text joins the user's content inside the user element: no seams around it)
    merged = tuple(p for p in system if p != SEAM)
    style: dict[str, Jsonable] = {"system_style": "first-user", "system_merge": merged} if cls == "llama2" else {}
    t = Template(str(data.get("name") or origin), f"imported from {origin} (LLaMA-Factory slots)",
                 {"system": system, "user": user, "assistant": assistant + sep}, prefix=prefix,
                 generation_prompt=(), default_system=default or None, empty_system_default=True,
                 stop_words=words, stop_tokens=tokens, **style)
    return t, [f"{origin}: {note}"] if note else []

