"""LLaMA-Factory-style slot templates written as data (JSON), imported as a chatlab Template.

LLaMA-Factory registers templates in Python as formatters with slots, e.g.
`format_user=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>assistant\\n"]`. The JSON
form here keeps those names: format_user, format_assistant (required), format_system,
format_separator, default_system, stop_words (and format_prefix). A slot list holds strings (with
`{{content}}` once per role) and objects: {"token": "<|im_start|>"} for a special token,
{"bos_token": true} / {"eos_token": true} for the tokenizer's own. LLaMA-Factory's encoding
(template.py `_encode`): the prefix and the system (content or default_system) before the first
message, format_separator before every user turn but the first, the user slot usually ending
with the assistant header (so the reply opens there). Folding the separator into the end of the
assistant turn gives the same ids for every conversation that ends with a user turn.
"""
from __future__ import annotations

import json
from typing import Any

from chatlab.errors import ChatlabError
from chatlab.render.io.flat import json_config, stops_of
from chatlab.render.template import BOS, CONTENT, EOS, Part, Parts, S, T, Template

FIELDS = ("name", "format_user", "format_assistant", "format_system", "format_separator",
          "format_prefix", "default_system", "stop_words")


def _slots(value: Any, field: str, origin: str, content: bool) -> Parts:
    """One formatter's slots as chatlab parts; `{{content}}` becomes CONTENT."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ChatlabError(f"{origin}: field {field!r} must be a list of slots (strings or "
                           '{"token": ...} objects), not ' + type(value).__name__)
    out: list[Part] = []
    for k, slot in enumerate(value):
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
    n = out.count(CONTENT)
    if content and n != 1:
        raise ChatlabError(f"{origin}: field {field!r} must contain {{{{content}}}} exactly once (found {n})")
    if not content and n:
        raise ChatlabError(f"{origin}: field {field!r} cannot contain {{{{content}}}}")
    return tuple(out)


def parse_llamafactory(text: str, origin: str = "<text>") -> Template:
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
    stops = data.get("stop_words") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise ChatlabError(f"{origin}: field 'stop_words' must be a list of non-empty strings")
    user = _slots(data["format_user"], "format_user", origin, True)
    assistant = _slots(data["format_assistant"], "format_assistant", origin, True)
    system = _slots(data.get("format_system", ["{{content}}"]), "format_system", origin, True)
    sep = _slots(data.get("format_separator", []), "format_separator", origin, False)
    prefix = _slots(data.get("format_prefix", []), "format_prefix", origin, False)
    words, tokens = stops_of(stops)
    # LLaMA-Factory writes a system block only when there is text (`if system or tools`), so an
    # empty default is none; at inference the prompt ends where the last user slot ends (the
    # assistant slot is the response), hence no generation prompt of its own.
    return Template(str(data.get("name") or origin), f"imported from {origin} (LLaMA-Factory slots)",
                    {"system": system, "user": user, "assistant": assistant + sep}, prefix=prefix,
                    generation_prompt=(), default_system=default or None,
                    stop_words=words, stop_tokens=tokens)

