"""Load a tokenizer or a chat model by asset name, local folder, or hub id."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from chatlab.errors import UnknownNameError
from chatlab.models.assets import ASSETS
from chatlab.models.hub import from_hub
from chatlab.models.store import asset_path


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts)


def _check_name(name: str) -> None:
    if name not in ASSETS and not Path(name).exists() and not _looks_like_hub_id(name):
        raise UnknownNameError(
            "model", name, list(ASSETS) + ["a local folder", "a hub id like Qwen/Qwen2.5-0.5B-Instruct"])


def load_tokenizer(name: str) -> Any:
    """A tokenizer: an asset name, a local folder, or a hub id (online only)."""
    from transformers import AutoTokenizer

    _check_name(name)
    if name == "qwen1-tokenizer":
        from chatlab.models.qwen1 import Qwen1Tokenizer

        return Qwen1Tokenizer(asset_path(name))
    if name in ASSETS:
        asset = ASSETS[name]
        if asset.build == "stand-in":
            from chatlab.models import standins

            return standins.load_tokenizer(asset)
        return AutoTokenizer.from_pretrained(asset_path(name))
    if Path(name).exists():
        return AutoTokenizer.from_pretrained(name)
    return from_hub(AutoTokenizer.from_pretrained, name, trust_remote_code=True)


def load_model(name: str, dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) for a chat model: an asset name, a local folder, or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM

    _check_name(name)
    torch_dtype = getattr(torch, dtype)
    if name in ASSETS:
        asset = ASSETS[name]
        if asset.kind != "chat-model":
            chat = [a.name for a in ASSETS.values() if a.kind == "chat-model"]
            raise UnknownNameError("chat model", name, chat)
        folder = asset_path(name)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype)
        return model.eval(), load_tokenizer(name)
    if Path(name).exists():
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype)
        return model.eval(), load_tokenizer(name)
    model = from_hub(AutoModelForCausalLM.from_pretrained, name, dtype=torch_dtype,
                     trust_remote_code=True)
    return model.eval(), load_tokenizer(name)
