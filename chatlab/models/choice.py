"""Which chat model the notebooks and `chatlab serve` / `chatlab complete` use: one variable.

`CHATLAB_MODEL` holds a store name (`chatlab models`), a local model folder or a hub id; unset,
it is the offline default, SmolLM2-135M-Instruct. `model_note` says what changes with another.
"""
from __future__ import annotations

import os

from chatlab.errors import ChatlabError
from chatlab.models import hub
from chatlab.models.assets import ASSETS
from chatlab.models.load import _check_name, _exists

DEFAULT_MODEL = "smollm2-135m-instruct"
STRONGER_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


def default_model() -> str:
    """`$CHATLAB_MODEL`, else the offline default; a value that names nothing is an error now,
    not a traceback deep inside a model load."""
    name = os.environ.get("CHATLAB_MODEL", "").strip()
    if not name:
        return DEFAULT_MODEL
    try:
        _check_name(name)
    except ChatlabError as err:
        raise ChatlabError(f"CHATLAB_MODEL={name[:200]!r} names no model ({err}); set it to a store "
                           f"name, a model folder or a hub id, or unset it for {DEFAULT_MODEL}") from None
    return name


def model_note(model: str | None = None, timeout: float = 2.0) -> str:
    """One line for a notebook: the model in use, and the stronger one when the hub is reachable."""
    model = model or default_model()
    line = f"model: {model} (set CHATLAB_MODEL before starting Jupyter to change it)"
    if model != DEFAULT_MODEL:
        return line + f"; the saved outputs were made with {DEFAULT_MODEL}, so yours will differ"
    reachable, _ = hub.hub_reachable(timeout=timeout)
    if not reachable:
        return line
    return (f"{line}. The Hugging Face hub is reachable: CHATLAB_MODEL={STRONGER_MODEL} downloads "
            "a 1.5B model (~3 GB, ~6 GB of memory in float32) that answers correctly and makes real "
            "tool calls, about 10x slower per token on a CPU; the saved outputs below come from the "
            "135M default")


def local_model(name: str) -> str:
    """What to hand to code that needs files on disk (the OpenVINO export): a store name or a
    folder as it is, a hub id as its snapshot folder in the Hugging Face cache (downloaded once,
    weights and tokenizer only; offline, only what the cache already holds)."""
    _check_name(name)
    if name in ASSETS or _exists(name):
        return name
    from huggingface_hub import snapshot_download

    return str(hub.from_hub(snapshot_download, name,
                        allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken"]))
