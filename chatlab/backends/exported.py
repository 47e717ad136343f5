"""What a model folder says about its model, read from its config files: the context window,
the end ids; and, for an exported OpenVINO folder (chatlab's loop over the IR, and
openvino-genai's pipeline), the chat tokenizer and a light decoder."""
from __future__ import annotations

import json
from pathlib import Path

from chatlab._thirdparty import Decoder, HFTokenizer
from chatlab.models import load_tokenizer


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


class ExportedModel:
    def __init__(self, folder: Path, model_name: str | None = None, tokenizer: HFTokenizer = None) -> None:
        self.folder, self.model_name = folder, model_name
        self.context_length = context_length_from(folder)
        self.eos_ids = eos_ids_from(folder, None)
        self._tokenizer: HFTokenizer = tokenizer
        self._decoder: Decoder = None

    @property
    def tokenizer_loaded(self) -> bool:
        return self._tokenizer is not None

    @property
    def tokenizer(self) -> HFTokenizer:
        """The chat tokenizer (for rendering), loaded on first use: it pulls in transformers
        and torch, which generation itself does not need (see `decoder`)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.model_name or str(self.folder))
        return self._tokenizer

    @property
    def decoder(self) -> Decoder:
        """What the loop's detokenizer calls `.decode(ids, skip_special_tokens=...)` on: the
        `tokenizers` library straight from tokenizer.json, without transformers or torch (a
        tokenizers.Tokenizer, untyped), else the chat tokenizer."""
        if self._decoder is None:
            path = self.folder / "tokenizer.json"
            if path.is_file() and not cleans_up_spaces(self.folder):
                from tokenizers import Tokenizer

                self._decoder = Tokenizer.from_file(str(path))
            else:
                self._decoder = self.tokenizer
        return self._decoder


def cleans_up_spaces(folder: Path) -> bool:
    """transformers' decode post-processes spaces when this is set; raw `tokenizers` does not."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return True
    return bool(config.get("clean_up_tokenization_spaces", False))
