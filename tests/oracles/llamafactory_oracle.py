"""LLaMA-Factory's own templates (llamafactory/data/template.py), loaded without its trainer.

template.py imports its logging helper, data_utils (which imports datasets and fsspec at the
top for other functions), formatter and tool_utils (plain Python) and mm_plugin (torch,
torchaudio, PIL, transformers' vision utils). The stubs give just the names those imports take;
templates call mm_plugin only for images, which these tests never send. `encode_oneturn` then
runs LLaMA-Factory's own _encode: its prompt ids are what training (and its own chat) feeds.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

HOW = ("LLaMA-Factory oracle absent: pip install --no-deps --target DIR llamafactory==0.9.5 "
       "and set CHATLAB_ORACLE_SITE=DIR")
PREFIX = "chatlab_oracle_llamafactory"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


def load() -> Any:
    """The llamafactory.data.template module, or a pytest skip naming how to get it."""
    if f"{PREFIX}.data.template" in sys.modules:
        return sys.modules[f"{PREFIX}.data.template"]
    root = Path(os.environ.get("CHATLAB_ORACLE_SITE") or Path.home() / ".cache" / "chatlab-oracles") / "llamafactory"
    if not (root / "data" / "template.py").is_file():
        pytest.skip(HOW)
    any_ = type("Anything", (), {})
    stubs = {
        PREFIX: _module(PREFIX, __path__=[str(root)]),
        f"{PREFIX}.extras": _module(f"{PREFIX}.extras", __path__=[str(root / "extras")]),
        f"{PREFIX}.extras.logging": _module(f"{PREFIX}.extras.logging", get_logger=logging.getLogger),
        f"{PREFIX}.data": _module(f"{PREFIX}.data", __path__=[str(root / "data")]),
        f"{PREFIX}.data.mm_plugin": _module(f"{PREFIX}.data.mm_plugin", get_mm_plugin=lambda *a, **k: None,
                                            BasePlugin=any_),
    }
    saved = {n: sys.modules.get(n) for n in ("datasets", "fsspec")}
    try:
        sys.modules["datasets"] = _module("datasets", DatasetDict=any_, concatenate_datasets=None,
                                          interleave_datasets=None)
        sys.modules["fsspec"] = _module("fsspec")
        sys.modules.update(stubs)
        stubs[f"{PREFIX}.extras"].logging = stubs[f"{PREFIX}.extras.logging"]
        for name in ("data_utils", "tool_utils", "formatter", "template"):
            full = f"{PREFIX}.data.{name}"
            spec = importlib.util.spec_from_file_location(full, root / "data" / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[full] = mod
            spec.loader.exec_module(mod)
    finally:
        for n, old in saved.items():
            if old is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = old
    return sys.modules[f"{PREFIX}.data.template"]


def prompt_ids(name: str, tokenizer: Any, messages: list[dict]) -> list[int]:
    """LLaMA-Factory's prompt ids for `messages` (ending with a user turn), template `name`:
    the system message goes in as `system`, the rest as its user/assistant messages."""
    template = load().TEMPLATES[name]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    prompt, _ = template.encode_oneturn(tokenizer, [*turns, {"role": "assistant", "content": ""}], system)
    return prompt


def names() -> list[str]:
    return sorted(load().TEMPLATES)
