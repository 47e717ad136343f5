"""Which model: a store name, a local model folder or a Hugging Face hub id (local cache first,
then the hub), checked by name before anything loads; `CHATLAB_MODEL` picks the default."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, TypeVar
from urllib.parse import urlparse

from chatlab.errors import ChatlabError, HubUnavailableError, UnknownNameError
from chatlab.models.assets import ASSETS, names_of

def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts)


# what a Hugging Face model or tokenizer folder holds at least one of
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model")


def _exists(name: str) -> bool:
    """Path.exists, but a 100k-character or NUL-holding name is simply not a path."""
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return False


def _check_name(name: str) -> None:
    """A store name, a folder holding a model, or a hub id; anything else is a one-line error."""
    if name in ASSETS:
        return
    if _exists(name):
        folder = Path(name)
        if not folder.is_dir() or not any((folder / f).is_file() for f in MODEL_FILES):
            what = "folder" if folder.is_dir() else "file"
            raise ChatlabError(f"{name[:200]!r} is a {what} but holds no model (none of "
                               f"{', '.join(MODEL_FILES)}); pass a Hugging Face model folder, a "
                               "store name (see `chatlab models`) or a hub id like Qwen/Qwen2.5-0.5B-Instruct")
        return
    if not _looks_like_hub_id(name):
        raise UnknownNameError(
            "model", name[:200], list(ASSETS) + ["a local folder", "a hub id like Qwen/Qwen2.5-0.5B-Instruct"])


_T = TypeVar("_T")


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """(reachable, reason). Honors HF_HUB_OFFLINE and HF_ENDPOINT."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False, "HF_HUB_OFFLINE is set"
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        return False, f"cannot connect to {host}:{port}: {err}"
    return True, "reachable"


def offline_alternatives(hub_id: str) -> str:
    same = [a.name for a in ASSETS.values() if a.hub_id == hub_id]
    if same:
        return f"use the offline asset {same[0]!r} instead (it stands for {hub_id})"
    return ("offline alternatives: " + ", ".join(names_of("chat-model")) +
            " (chat models); run `chatlab models` to see what is available here")


def from_hub(loader: Callable[..., _T], hub_id: str, **kwargs: object) -> _T:
    """Call `loader(hub_id, **kwargs)`: local HF cache first, then the hub if reachable."""
    try:
        return loader(hub_id, local_files_only=True, **kwargs)
    except Exception:  # noqa: BLE001 - not in the local cache. Any error: huggingface_hub reads
        pass  # HF_HUB_OFFLINE once, at import, and some lookups then try the network anyway
    ok, why = hub_reachable()
    if not ok:
        raise HubUnavailableError(f"{hub_id!r} needs the Hugging Face hub, which is not reachable ({why}); "
                                  f"{offline_alternatives(hub_id)}")
    try:
        return loader(hub_id, **kwargs)
    except (OSError, ValueError) as err:  # no such repo, gated, no weights: the user's to fix
        raise ChatlabError(f"cannot load {hub_id!r} from the Hugging Face hub: {_first_line(err)}; check "
                           "the hub id (or use a store name, see `chatlab models`)") from None


def _from_folder(loader: Callable[..., _T], folder: str, **kwargs: object) -> _T:
    """transformers on a local folder; a folder it cannot read is the user's error, in one line."""
    try:
        return loader(folder, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise ChatlabError(f"cannot load a model from the folder {folder!r}: {_first_line(err)}; "
                           "check that it holds a complete Hugging Face model (config.json, weights, "
                           "tokenizer)") from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


DEFAULT_MODEL = "smollm2-135m-instruct"
STRONGER_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


def default_model() -> str:
    """`$CHATLAB_MODEL` (checked now), else the offline default."""
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
    line = f"model: {model} (to change it, run %env CHATLAB_MODEL=<name> in a cell above this one)"
    if model != DEFAULT_MODEL:
        return line + f"; the saved outputs were made with {DEFAULT_MODEL}, so yours will differ"
    reachable, _ = hub_reachable(timeout=timeout)
    if not reachable:
        return line
    return (f"{line}. The Hugging Face hub is reachable: CHATLAB_MODEL={STRONGER_MODEL} downloads "
            "a 1.5B model (~3 GB, ~6 GB of memory in float32) that answers correctly and makes real "
            "tool calls, about 10x slower per token on a CPU; the saved outputs below come from the "
            "135M default")


def local_model(name: str) -> str:
    """A store name or folder as it is, a hub id as its snapshot folder in the Hugging Face cache."""
    _check_name(name)
    if name in ASSETS or _exists(name):
        return name
    from huggingface_hub import snapshot_download

    return str(from_hub(snapshot_download, name,
                        allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken"]))
