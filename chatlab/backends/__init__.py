"""Backends the generation loop can drive: PyTorch (transformers) and OpenVINO (optimum's IR);
and openvino-genai's continuous batching ("genai"), which chatlab.engine.batched drives instead."""
from __future__ import annotations

from chatlab.backends.base import Backend
from chatlab.backends.precision import DEFAULT_PRECISION, PRECISIONS, check_precision
from chatlab.errors import UnknownNameError

BACKENDS = ["torch", "openvino", "genai"]
DEFAULT_BACKEND = "openvino"  # the fastest path that is still exact (int8 weights, f32 math)
WEIGHT_FORMATS = ["fp32", "int8", "int4"]
# Each backend's weight format when none is given: OpenVINO int8 decodes ~4x faster than
# PyTorch fp32 and still answers correctly at f32; PyTorch runs the weights as stored.
DEFAULT_WEIGHT_FORMAT = {"openvino": "int8", "torch": "fp32", "genai": "int8"}


def load_backend(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                 weight_format: str | None = None, precision: str = DEFAULT_PRECISION,
                 **options: object) -> Backend:
    """A ready backend. OpenVINO exports the model on first use (cached, ~30 s, with progress).

    `precision` is the arithmetic: "f32" (default; greedy tokens equal PyTorch fp32's on every
    CPU) or "bf16" (faster on CPUs with avx512_bf16/AMX, drifts; refused elsewhere). The
    applied value is `backend.precision`, read back from the runtime. Other options: `threads`;
    for OpenVINO `attention` ("paged", the default, or "sdpa": the stateful graph as exported)
    and `kv_cache_precision`; for genai `max_seqs` and `cache_gb`.
    """
    if backend not in BACKENDS:
        raise UnknownNameError("backend", backend, BACKENDS)
    weight_format = weight_format or DEFAULT_WEIGHT_FORMAT[backend]
    if weight_format not in WEIGHT_FORMATS:
        raise UnknownNameError("weight format", weight_format, WEIGHT_FORMATS)
    precision = check_precision(precision)  # every check before any slow load or export
    if backend == "torch":
        if weight_format != "fp32":
            raise UnknownNameError("weight format for the torch backend (quantized formats need "
                                   "--backend openvino)", weight_format, ["fp32"])
        from chatlab.backends import torch as torch_backend

        return torch_backend.load(model, precision=precision, **options)  # type: ignore[arg-type]
    if backend == "genai":
        from chatlab.backends import genai

        return genai.load(model, weight_format, precision=precision, **options)  # type: ignore[arg-type]
    from chatlab.backends import openvino as ov_backend

    return ov_backend.load(model, weight_format, precision=precision, **options)  # type: ignore[arg-type]


__all__ = ["BACKENDS", "Backend", "DEFAULT_BACKEND", "DEFAULT_PRECISION", "DEFAULT_WEIGHT_FORMAT",
           "PRECISIONS", "WEIGHT_FORMATS", "load_backend"]
