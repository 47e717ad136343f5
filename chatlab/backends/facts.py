"""A model folder's facts, read from its config files: its end ids and its context window."""
from __future__ import annotations

import json
from pathlib import Path

from chatlab._thirdparty import HFTokenizer


def eos_ids_from(folder: Path, tokenizer: HFTokenizer = None) -> list[int]:
    """generation_config's eos ids (int or list), else config's, else the tokenizer's."""
    for fname in ("generation_config.json", "config.json"):
        try:
            eos = json.loads((folder / fname).read_text()).get("eos_token_id")
        except (OSError, ValueError):
            continue
        if eos is not None:
            return [eos] if isinstance(eos, int) else [int(e) for e in eos]
    eos = getattr(tokenizer, "eos_token_id", None)
    return [eos] if isinstance(eos, int) else []


def context_length_from(folder: Path) -> int:
    config = json.loads((folder / "config.json").read_text())
    return int(config.get("max_position_embeddings") or config.get("seq_length") or 2048)
