"""An engine by backend name: the registry (chatlab.backends.registry) says which token source
drives the backend — chatlab's loop (ChatEngine over a step backend) or a batched pipeline
(BatchedEngine) — so no caller branches on the name."""
from __future__ import annotations

from typing import Any

from chatlab.backends.precision import DEFAULT_PRECISION
from chatlab.backends.registry import DEFAULT_BACKEND, check_choice, load_backend
from chatlab.protocols import BatchedBackend, StepBackend
from chatlab.engine.engine import ChatEngine


def load_engine(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                weight_format: str | None = None, template: str | None = None,
                precision: str = DEFAULT_PRECISION, **options: Any) -> ChatEngine:
    """A ready engine for `model` on `backend` (options: the backend's, see the registry)."""
    spec, weight_format = check_choice(backend, weight_format, options)
    loaded = load_backend(model, backend, weight_format, precision, **options)
    if spec.source == "batched":
        from chatlab.engine.batched import BatchedEngine

        assert isinstance(loaded, BatchedBackend)
        return BatchedEngine(loaded, model, template)
    assert isinstance(loaded, StepBackend)
    return ChatEngine(loaded, model, template)
