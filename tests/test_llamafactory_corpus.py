"""Every template LLaMA-Factory 0.9.5 registers, read in place from the installed package, written
as chatlab's slot JSON, imported, and rendered id for id against LLaMA-Factory's own _encode
(tests/oracles/llamafactory_oracle.py) on plain conversations. A template chatlab cannot import
must be refused with a reason; one it imports must be id-equal: a silent mismatch fails.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache

import pytest

from chatlab.errors import ChatlabError
from chatlab.render import resolve
from chatlab.render.io import load_template
from oracles import llamafactory_oracle
from test_engine_semantics import tok_with

CHATS = {
    "single": [{"role": "user", "content": "hi"}],
    "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
    "empty-system": [{"role": "system", "content": ""}, {"role": "user", "content": "Hello"}],
    "multi": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
              {"role": "user", "content": "2+2? 你好"}],
}
SPECIAL = re.compile(r"<\|[^<>|\s]+\|>|<[a-zA-Z_/][^<>\s]*>|\[[A-Za-z_]+\]")


def _slots(formatter) -> list:
    out = []
    for s in formatter.slots:
        if isinstance(s, str):
            out.append(s)
        elif isinstance(s, set):  # LLaMA-Factory writes bos or eos for these; any other set, nothing
            if "bos_token" in s or "eos_token" in s:
                out.append({"bos_token": True} if "bos_token" in s else {"eos_token": True})
        else:
            out.append({"token": s["token"]})
    return out


def as_slot_json(t) -> tuple[dict, str]:
    """(chatlab slot JSON, the template class) of a registered LLaMA-Factory template."""
    cls = type(t).__name__
    data = {"format_user": _slots(t.format_user), "format_assistant": _slots(t.format_assistant),
            "format_system": _slots(t.format_system),
            "format_prefix": _slots(t.format_prefix), "default_system": t.default_system,
            "stop_words": list(t.stop_words)}
    if cls == "Llama2Template":
        data["template_class"] = "llama2"
    elif cls != "Template":
        data["template_class"] = cls  # refused by chatlab with the class named
    return data, cls


def specials_of(t) -> list[str]:
    """The special tokens a real tokenizer for `t` has: its {"token": ...} slots, and the
    special-looking text in its string slots and stop words."""
    slots = [s for f in (t.format_user, t.format_assistant, t.format_system, t.format_prefix) for s in f.slots]
    found = {s["token"] for s in slots if isinstance(s, dict)}
    found |= {m for s in slots if isinstance(s, str) for m in SPECIAL.findall(s)}
    found |= {w for w in t.stop_words if SPECIAL.fullmatch(w)}
    return sorted(found - {"{{content}}"})


@lru_cache(maxsize=1)
def union_tokenizer():
    """One tokenizer with the special tokens of every registered template (bos <s>, eos </s>):
    both sides encode with it, so "equal" means the same layout and the same encoding rules."""
    found = {s for t in llamafactory_oracle.load().TEMPLATES.values() for s in specials_of(t)}
    return tok_with(*sorted(found - {"<s>", "</s>"}), "</s>", bos="<s>")


def run_one(name: str) -> str:
    """"equal", "refused: why", or raises AssertionError on a silent mismatch."""
    t = llamafactory_oracle.load().TEMPLATES[name]
    data, cls = as_slot_json(t)
    try:
        loaded = load_template(json.dumps(data), "llamafactory")
    except ChatlabError as err:
        return f"refused: {str(err).split(';')[0][:90]}"
    tok = union_tokenizer()
    for chat, msgs in CHATS.items():
        want = llamafactory_oracle.prompt_ids(name, tok, msgs)
        got = resolve(tok, template=loaded).render(msgs).ids
        assert got == want, (name, chat, tok.decode(got), tok.decode(want))
    return "equal"


def test_llamafactory_registered_templates_are_equal_or_refused():
    names = llamafactory_oracle.names()
    results, mismatches = {}, {}
    for name in names:
        try:
            results[name] = run_one(name)
        except AssertionError as err:
            mismatches[name] = str(err)[:300]
    counts = Counter("equal" if r == "equal" else "refused" for r in results.values())
    print(f"\nLLaMA-Factory corpus: tried {len(names)}, imported {len(names) - counts['refused']}, "
          f"id-equal {counts['equal']}, refused {counts['refused']}, silent mismatches {len(mismatches)}")
    for r, n in Counter(r for r in results.values() if r != "equal").most_common():
        print(f"  {n:3d}  {r}")
    assert not mismatches, "\n".join(f"{k}: {v}" for k, v in mismatches.items())
