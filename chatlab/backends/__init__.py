"""Backends the generation loop can drive: PyTorch (transformers) and OpenVINO (stateful IR)."""
from __future__ import annotations

from chatlab.backends.base import Backend
from chatlab.errors import UnknownNameError

BACKENDS = ["torch", "openvino"]
WEIGHT_FORMATS = ["fp32", "int8", "int4"]


def load_backend(model: str = "smollm2-135m-instruct", backend: str = "torch",
                 weight_format: str = "fp32", **options: object) -> Backend:
    """A ready backend. PyTorch runs fp32 only; OpenVINO exports the model on first use.

    OpenVINO options: `precision` ("f32" for bit-parity with PyTorch, default: the device's
    own, bf16 on recent CPUs), `threads`. PyTorch options: `threads`.
    """
    if backend not in BACKENDS:
        raise UnknownNameError("backend", backend, BACKENDS)
    if weight_format not in WEIGHT_FORMATS:
        raise UnknownNameError("weight format", weight_format, WEIGHT_FORMATS)
    if backend == "torch":
        if weight_format != "fp32":
            raise UnknownNameError("weight format for the torch backend", weight_format, ["fp32"])
        from chatlab.backends import torch as torch_backend

        return torch_backend.load(model, **options)  # type: ignore[arg-type]
    from chatlab.backends import openvino as ov_backend

    return ov_backend.load(model, weight_format, **options)  # type: ignore[arg-type]


__all__ = ["BACKENDS", "Backend", "WEIGHT_FORMATS", "load_backend"]
