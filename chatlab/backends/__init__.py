"""Backends: PyTorch and OpenVINO for chatlab's loop, openvino-genai's batching (see .registry)."""
from chatlab.backends.precision import DEFAULT_PRECISION, PRECISIONS, check_precision
from chatlab.protocols import AnyBackend, BatchedBackend, StepBackend
from chatlab.backends.registry import (DEFAULT_BACKEND, REGISTRY, WEIGHT_FORMATS, BackendSpec, get_spec,
                                       load_backend, load_step_backend)

__all__ = ["AnyBackend", "BackendSpec", "BatchedBackend", "DEFAULT_BACKEND",
           "DEFAULT_PRECISION", "PRECISIONS", "REGISTRY", "StepBackend",
           "WEIGHT_FORMATS", "check_precision", "get_spec", "load_backend", "load_step_backend"]
