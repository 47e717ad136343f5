"""LMDeploy's own chat templates (lmdeploy/model.py), loaded without its engine.

model.py imports `mmengine.Registry` (a name -> class table), `lmdeploy.archs.get_model_arch`
(used only when matching a model path) and `lmdeploy.utils.get_logger` (which imports torch);
the stubs below provide just those, so `ChatTemplateConfig.from_json(...).chat_template()
.messages2prompt(messages)` runs LMDeploy's code as `lmdeploy serve api_server --chat-template`
does. The prompt is then tokenized the way LMDeploy's Tokenizer.encode(prompt, add_bos=True)
does: the HF tokenizer with special tokens on, a doubled leading bos dropped.
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

HOW = ("LMDeploy oracle absent: pip install --no-deps --target DIR lmdeploy==0.18.0 "
       "and set CHATLAB_ORACLE_SITE=DIR")


class _Registry:
    """mmengine.Registry's part that model.py uses: register_module (as a decorator or with
    module=) under one name or several, get, module_dict."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.module_dict: dict[str, Any] = {}

    def register_module(self, name: Any = None, module: Any = None, force: bool = False) -> Any:
        def add(cls: Any) -> Any:
            for n in ([name] if isinstance(name, str) else name or [cls.__name__]):
                self.module_dict[n] = cls
            return cls
        return add(module) if module is not None else add

    def get(self, name: str) -> Any:
        return self.module_dict.get(name)


def site() -> Path | None:
    root = os.environ.get("CHATLAB_ORACLE_SITE") or Path.home() / ".cache" / "chatlab-oracles"
    path = Path(root) / "lmdeploy" / "model.py"
    return path if path.is_file() else None


def load() -> Any:
    """The lmdeploy.model module, or a pytest skip naming how to get it."""
    if "chatlab_oracle_lmdeploy_model" in sys.modules:
        return sys.modules["chatlab_oracle_lmdeploy_model"]
    path = site()
    if path is None:
        pytest.skip(HOW)
    stubs = {"mmengine": {"Registry": _Registry},
             "lmdeploy": {"__path__": []},
             "lmdeploy.archs": {"get_model_arch": lambda *a, **k: (None, None)},
             "lmdeploy.utils": {"get_logger": lambda name: logging.getLogger(name)}}
    saved = {name: sys.modules.get(name) for name in stubs}
    try:
        for name, attrs in stubs.items():
            mod = types.ModuleType(name)
            mod.__dict__.update(attrs)
            sys.modules[name] = mod
        spec = importlib.util.spec_from_file_location("chatlab_oracle_lmdeploy_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    module.BUILTIN_NAMES = sorted(module.MODELS.module_dict)  # before from_json registers any
    sys.modules["chatlab_oracle_lmdeploy_model"] = module
    return module


def prompt(config_json: str, messages: list[dict]) -> str:
    """The text LMDeploy renders for `messages` from a `--chat-template` JSON config."""
    import tempfile

    model = load()
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:  # as the CLI reads it
        f.write(config_json)
        f.flush()
        config = model.ChatTemplateConfig.from_json(f.name)
    return config.chat_template().messages2prompt(messages)


def ids(tokenizer: Any, text: str) -> list[int]:
    """LMDeploy's Tokenizer.encode(text, add_bos=True) over a Hugging Face tokenizer."""
    out = list(tokenizer.encode(text, add_special_tokens=True))
    if tokenizer.bos_token_id is not None and out[:2] == [tokenizer.bos_token_id] * 2:
        out = out[1:]
    return out


def builtin_names() -> list[str]:
    return load().BUILTIN_NAMES
