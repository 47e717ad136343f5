"""PyTorch backend: a transformers causal LM and its DynamicCache, one token per call.

Why it is not slower than `model.generate()`: each step is one forward with `logits_to_keep=1`
(the output projection runs for the last position only, so prefill does not build a
prompt-length × vocabulary matrix), under `inference_mode`, with the input tensor reused; the
only per-token Python left is the forward call itself and a numpy view of the logits.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from chatlab._thirdparty import HFTokenizer
from chatlab.backends.base import Backend, context_length_from, eos_ids_from
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, normalize_precision


class TorchBackend(Backend):
    def __init__(self, model: Any, tokenizer: HFTokenizer, folder: Path | None = None,
                 threads: int | None = None, precision: str = DEFAULT_PRECISION,
                 emulate_bf16: bool = False) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        # bf16 is refused on a CPU without bf16 instructions, where it would only be emulated
        # (a benchmark would time software rounding). `emulate_bf16=True` accepts it anyway:
        # PyTorch then rounds to bf16 in software, the same numbers a bf16 CPU computes, which is
        # what a lesson on such a CPU needs to show bf16's drift. Not for speed.
        self.precision = normalize_precision(precision) if emulate_bf16 else check_precision(precision)
        self.threads = torch.get_num_threads()
        # bf16 casts the weights (and so the activations) like OpenVINO's bf16 hint does, so
        # the bench can compare engines at one precision; f32 leaves the model as loaded.
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        self.model = model.to(dtype).eval()
        self.tokenizer = tokenizer
        config = model.config
        self.vocab_size = int(config.vocab_size)
        self.context_length = (context_length_from(folder) if folder
                               else int(getattr(config, "max_position_embeddings", 2048)))
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if folder is not None:
            self.eos_ids = eos_ids_from(folder, tokenizer)
        else:
            self.eos_ids = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        self.name = "torch"
        self.cache: Any = None
        self.length = 0  # tokens in the cache
        self._one = torch.zeros((1, 1), dtype=torch.long)  # reused input of a decode step

    def reset(self) -> None:
        self.cache, self.length = None, 0

    def _forward(self, input_ids: Any) -> np.ndarray:
        with self.torch.inference_mode():
            out = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                             logits_to_keep=1)
        self.cache = out.past_key_values
        self.length += input_ids.shape[1]
        # float32 row, no copy; `.numpy()` shares memory with the output tensor.
        return out.logits[0, -1].float().numpy()

    def prefill(self, ids: list[int]) -> np.ndarray:
        from transformers import DynamicCache

        if not ids:
            raise ValueError("prefill needs at least one token")
        self.reset()
        self.cache = DynamicCache(config=self.model.config)
        return self._forward(self.torch.tensor([ids], dtype=self.torch.long))

    def step(self, token_id: int) -> np.ndarray:
        self._one[0, 0] = token_id
        return self._forward(self._one)


def load(model_name: str, threads: int | None = None,
         precision: str = DEFAULT_PRECISION) -> TorchBackend:
    from chatlab.models import asset_path, load_model
    from chatlab.models.assets import ASSETS

    precision = check_precision(precision)
    model, tokenizer = load_model(model_name)
    folder = asset_path(model_name) if model_name in ASSETS else (
        Path(model_name) if Path(model_name).exists() else None)
    return TorchBackend(model, tokenizer, folder, threads=threads, precision=precision)
