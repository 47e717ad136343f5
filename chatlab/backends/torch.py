"""PyTorch backend: a transformers causal LM and its DynamicCache, one token per call."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from chatlab._thirdparty import HFCache, HFModel, HFTokenizer
from chatlab.backends.openvino import context_length_of, eos_ids_from
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, normalize_precision
from chatlab.models import ASSETS, asset_path, load_model

if TYPE_CHECKING:
    import torch


class TorchBackend:
    compute_notes: tuple[str, ...] = ()  # the load profile's notes (chatlab.backends.precision)

    def __init__(self, model: HFModel, tokenizer: HFTokenizer, folder: Path | None = None,
                 threads: int | None = None, precision: str = DEFAULT_PRECISION,
                 emulate_bf16: bool = False) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        # `emulate_bf16=True`: bf16 in software on a CPU without it (its drift, not its speed)
        self.precision = normalize_precision(precision) if emulate_bf16 else check_precision(precision)
        self.threads = torch.get_num_threads()
        # bf16 casts the weights (and so the activations) like OpenVINO's bf16 hint does.
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        self.model = model.to(dtype).eval()
        self.tokenizer = tokenizer
        self.vocab_size = int(model.config.vocab_size)
        # the facts as `folder`'s config files give them (as an export's), else as the model's
        config = json.loads((folder / "config.json").read_text()) if folder else model.config.to_dict()
        self.context_length = context_length_of(config)
        gen = model.generation_config
        eos = eos_ids_from(folder) if folder else gen.eos_token_id if gen is not None else None
        if not eos and tokenizer is not None:
            eos = tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else [int(e) for e in eos or []]
        self.name = "torch"
        self.cache: HFCache = None
        self.length = 0  # tokens in the cache
        self._one = torch.zeros((1, 1), dtype=torch.long)  # reused input of a decode step

    def reset(self) -> None:
        self.cache, self.length = None, 0

    def _forward(self, input_ids: "torch.Tensor", keep: int = 1) -> np.ndarray:
        with self.torch.inference_mode():
            out = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                             logits_to_keep=keep)
        self.cache = out.past_key_values
        self.length += input_ids.shape[1]
        return out.logits[0].float().numpy()  # shares memory with the output tensor

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        """Several tokens after the cache in one forward (a speculative draft, a new turn)."""
        if not ids or not 1 <= keep <= len(ids):
            raise ValueError(f"extend needs tokens and 1 <= keep <= {len(ids)}")
        if self.cache is None:
            from transformers import DynamicCache

            self.cache = DynamicCache(config=self.model.config)
        return self._forward(self.torch.tensor([ids], dtype=self.torch.long), keep)

    def snapshot(self) -> tuple[object, int]:
        """A deep copy of the cache (for chatlab.engine.lease's LRU) and its size in bytes."""
        snap = copy.deepcopy(self.cache)
        nbytes = sum(t.numel() * t.element_size() for layer in snap.layers
                     for t in (layer.keys, layer.values) if t is not None)
        return (snap, self.length), nbytes

    def restore(self, snap: object, length: int) -> None:
        assert isinstance(snap, tuple), "a snapshot of this backend: (its cache, its length)"
        self.cache, self.length = snap[0], length
        if snap[1] > length:
            self.cache.crop(length)

    def truncate(self, length: int) -> None:
        """Drop the cache past its first `length` tokens (DynamicCache.crop)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        if length == 0:
            self.reset()
        elif length < self.length:
            self.cache.crop(length)
        self.length = length

    def prefill(self, ids: list[int]) -> np.ndarray:
        if not ids:
            raise ValueError("prefill needs at least one token")
        self.reset()
        return self.extend(ids)[-1]

    def step(self, token_id: int) -> np.ndarray:
        self._one[0, 0] = token_id
        return self._forward(self._one)[-1]

    def __repr__(self) -> str:
        return (f"<TorchBackend {self.name} {self.precision} vocab={self.vocab_size} "
                f"ctx={self.context_length}>")


def load(model_name: str, threads: int | None = None, precision: str = DEFAULT_PRECISION) -> TorchBackend:
    precision = check_precision(precision)
    model, tokenizer = load_model(model_name)
    folder = asset_path(model_name) if model_name in ASSETS else (
        Path(model_name) if Path(model_name).exists() else None)
    return TorchBackend(model, tokenizer, folder, threads=threads, precision=precision)
