"""An engine by backend name: the registry (chatlab.backends.registry) says which token source
drives the backend — chatlab's loop (ChatEngine over a step backend) or a batched pipeline
(BatchedEngine) — so no caller branches on the name."""
from __future__ import annotations

from typing import TYPE_CHECKING

from chatlab._thirdparty import LoaderOption
from chatlab.backends.registry import DEFAULT_BACKEND, check_choice, load_backend
from chatlab.protocols import BatchedBackend, StepBackend
from chatlab.engine.engine import ChatEngine

if TYPE_CHECKING:
    from chatlab.render.resolve import TemplateChoice


def load_engine(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                weight_format: str | None = None, template: "TemplateChoice" = None,
                precision: str | None = None, **options: LoaderOption) -> ChatEngine:
    """A ready engine for `model` on `backend` (options: the backend's, see the registry; and
    chatlab's loop's `speculate` and `reuse_prefix`, see ChatEngine; `precision` None: f32, or
    the fast profile's with `fast=True`, see chatlab.backends.fast)."""
    speculate, reuse_prefix = options.pop("speculate", None), options.pop("reuse_prefix", False)
    if speculate is not None and backend == "openvino":
        # a verify pass agrees with a step only without the plugin's activation quantization
        options.setdefault("dynamic_quantization", False)
    spec, weight_format = check_choice(backend, weight_format, options)
    if spec.source == "batched" and (speculate is not None or reuse_prefix):
        from chatlab.errors import ChatlabError

        raise ChatlabError(f"speculate and reuse_prefix drive chatlab's own loop; the {backend} "
                           "backend batches its own tokens (its prefix caching: prefix_caching=True)")
    loaded = load_backend(model, backend, weight_format, precision, **options)
    if spec.source == "batched":
        from chatlab.engine.batched import BatchedEngine

        assert isinstance(loaded, BatchedBackend)
        return BatchedEngine(loaded, model, template)
    assert isinstance(loaded, StepBackend)
    return ChatEngine(loaded, model, template, speculate=speculate, reuse_prefix=reuse_prefix)
