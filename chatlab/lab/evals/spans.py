"""A JSON schema whose values must be pieces of the input sentence ("extractive" output).

A small model under a plain schema may answer with anything that fits `string`: the schema's
title, a field description, the example it saw last. Built per sentence, this schema lists the
candidates as `enum`s, so the grammar only lets the model choose among words of the sentence:
the name among its capitalised words, the color among its runs of one to three words. The
model still has to choose; the grammar only removes the answers that cannot be right.
"""
from __future__ import annotations

import re

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError


_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")


def _words(text: str) -> list[str]:
    # "Tilly's" -> "Tilly": a possessive is a person's or the dog's name plus an ending
    return [re.sub(r"'s$", "", w) for w in _WORD.findall(text)]


def capitalised_words(text: str) -> list[str]:
    """Distinct capitalised words, in order (candidate names)."""
    return list(dict.fromkeys(w for w in _words(text) if w[0].isupper()))


def word_runs(text: str, longest: int = 3) -> list[str]:
    """Distinct runs of 1..`longest` consecutive words, lower case (candidate colors); a
    hyphenated word counts whole and in parts ("apricot-colored" offers "apricot" too)."""
    whole = [w.lower() for w in _words(text)]
    parts = [p for w in whole for p in w.split("-") if p]
    runs = (" ".join(ws[i:i + n]) for ws in (whole, parts)
            for n in range(1, longest + 1) for i in range(len(ws) - n + 1))
    return list(dict.fromkeys(runs))


def span_schema(text: str, title: str = "Dog") -> dict[str, Jsonable]:
    """{"name": one of the capitalised words, "color": one of the word runs} for `text`."""
    names, runs = capitalised_words(text), word_runs(text)
    if not names:
        raise ChatlabError(f"no capitalised word in {text[:80]!r} to offer as a name; an extractive "
                           "schema needs the name in the sentence (use a plain schema otherwise)")
    return {"title": title, "type": "object",
            "properties": {"name": {"type": "string", "enum": names},
                           "color": {"type": "string", "enum": runs}},
            "required": ["name", "color"], "additionalProperties": False}
