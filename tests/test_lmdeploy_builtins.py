"""Every chat template LMDeploy 0.18 registers (lmdeploy/model.py's MODELS, read in place from the
installed package by tests/oracles/lmdeploy_oracle.py), against LMDeploy's own code.

For each built-in name, its class is built with its defaults and its fields (system,
meta_instruction, eosys, user, eoh, assistant, eoa, separator, tool, eotool, stop_words) are
written as a `--chat-template` JSON config under a name of its own: that is how a user serves a
built-in's layout from a file. Two checks:
  (a) chatlab's import of that config is id-equal to LMDeploy rendering the same file
      (ChatTemplateConfig.from_json(...).chat_template().messages2prompt + encode): always;
  (b) it is also id-equal to the built-in class's own messages2prompt, or chatlab's refusal of a
      config that names the built-in says which construct of the class the fields do not carry.
A difference that neither check explains is a silent mismatch and fails the test.
"""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from chatlab.errors import ChatlabError
from chatlab.render import resolve
from chatlab.render.io import load_template
from oracles import lmdeploy_oracle
from test_engine_oracles import CHATS  # the same four conversations as the config corpus
from test_engine_semantics import tok_with

FIELDS = ("system", "meta_instruction", "eosys", "user", "eoh", "assistant", "eoa", "separator", "tool", "eotool")
SPECIAL = re.compile(r"<\|[^<>|\s]+\|>|<｜[^<>｜]+｜>|</?s>|<[a-z_]+>")


def fields_of(name: str) -> dict | None:
    """The built-in's fields as a config of its own name, or None if its class cannot be built
    without a model (HFChatTemplate reads the model's tokenizer)."""
    cls = lmdeploy_oracle.load().MODELS.get(name)
    try:
        inst = cls()
    except Exception:
        return None
    data = {k: getattr(inst, k) for k in FIELDS if isinstance(getattr(inst, k, None), str)}
    if getattr(inst, "stop_words", None):
        data["stop_words"] = list(inst.stop_words)
    return {"model_name": f"{name}-fields", **data}


def tokenizer(configs: list[dict]):
    found = {m for c in configs for v in c.values() if isinstance(v, str) for m in SPECIAL.findall(v)}
    found |= {w for c in configs for w in c.get("stop_words", []) if SPECIAL.fullmatch(w)}
    return tok_with(*sorted(found - {"<s>"}), bos="<s>")


def run_one(name: str, config: dict | None, tok) -> str:
    """"equal", "refused: why" or "imported, not the built-in: why"; AssertionError when silent."""
    named = json.dumps({"model_name": name})  # what LMDeploy's to_json writes for a built-in
    with pytest.raises(ChatlabError) as refusal:
        load_template(named, "lmdeploy")
    why = str(refusal.value).split("built-in templates (", 1)[1].split("), so ", 1)[0]
    if config is None:
        return f"refused: {why}"
    text = json.dumps(config)
    try:
        loaded = load_template(text, "lmdeploy")
    except ChatlabError as err:
        return f"refused: {str(err)[:90]}"
    own = lmdeploy_oracle.load().MODELS.get(name)()
    same_as_builtin = True
    for chat, msgs in CHATS.items():
        got = resolve(tok, template=loaded).render(msgs).ids
        want_file = lmdeploy_oracle.ids(tok, lmdeploy_oracle.prompt(text, msgs))
        assert got == want_file, (name, chat, "vs LMDeploy on the file", tok.decode(got), tok.decode(want_file))
        try:
            builtin = own.messages2prompt(msgs)
        except ImportError:  # deepseek-v3.2/v4 import their encoders from the rest of lmdeploy
            same_as_builtin = False
            continue
        same_as_builtin &= got == lmdeploy_oracle.ids(tok, builtin)
    if same_as_builtin:
        return "equal"
    assert "messages2prompt" in why, (name, "differs from the built-in, but the refusal names no construct:", why)
    return f"refused: {why}"


def test_lmdeploy_builtins_are_equal_or_refused_naming_the_construct():
    names = lmdeploy_oracle.builtin_names()
    configs = {n: fields_of(n) for n in names}
    tok = tokenizer([c for c in configs.values() if c])
    results, mismatches = {}, {}
    for name in names:
        try:
            results[name] = run_one(name, configs[name], tok)
        except AssertionError as err:
            mismatches[name] = str(err)[:300]
    imported = sum(1 for n in names if configs[n] is not None)
    counts = Counter("equal" if r == "equal" else "refused" for r in results.values())
    print(f"\nLMDeploy built-ins: tried {len(names)}, imported (their fields as a config) {imported}, "
          f"id-equal to the built-in's own render {counts['equal']}, refused with a reason {counts['refused']}, "
          f"silent mismatches {len(mismatches)}")
    for name, r in sorted(results.items()):
        print(f"  {name:14s} {r}")
    assert not mismatches, "\n".join(f"{k}: {v}" for k, v in mismatches.items())
    # the field-only classes really are: chatlab's table and LMDeploy's code agree
    model = lmdeploy_oracle.load()
    for name, r in results.items():
        own_code = model.MODELS.get(name).messages2prompt is not model.BaseChatTemplate.messages2prompt
        assert (r == "equal") == (not own_code), name
