"""Hub ids load through the normal transformers path when the hub is reachable.

Offline, transformers retries and then raises a long OSError; instead we look in the local
Hugging Face cache first, then check reachability in at most a few seconds, and fail with a
message that names the offline alternatives.
"""
from __future__ import annotations

import os
import socket
from typing import Callable, TypeVar
from urllib.parse import urlparse

from chatlab.errors import ChatlabError, HubUnavailableError
from chatlab.models.assets import ASSETS

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
    chat = [a.name for a in ASSETS.values() if a.kind == "chat-model"]
    return ("offline alternatives: " + ", ".join(chat) +
            " (chat models); run `chatlab models` to see what is available here")


def from_hub(loader: Callable[..., _T], hub_id: str, **kwargs: object) -> _T:
    """Call `loader(hub_id, **kwargs)`: local HF cache first, then the hub if reachable."""
    try:
        return loader(hub_id, local_files_only=True, **kwargs)
    except Exception:  # noqa: BLE001 - not in the local cache. Any error: huggingface_hub reads
        pass  # HF_HUB_OFFLINE once, at import, and some lookups then try the network anyway
    ok, why = hub_reachable()
    if not ok:
        raise HubUnavailableError(
            f"{hub_id!r} needs the Hugging Face hub, which is not reachable ({why}); "
            f"{offline_alternatives(hub_id)}")
    try:
        return loader(hub_id, **kwargs)
    except (OSError, ValueError) as err:  # no such repo, gated, no weights: the user's to fix
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise ChatlabError(f"cannot load {hub_id!r} from the Hugging Face hub: {first}; check the "
                           "hub id (or use a store name, see `chatlab models`)") from None
