"""An engine by backend name: the registry (chatlab.backends.registry) checks every name and
option before anything loads, and the engine picks its token source from the backend it gets
(chatlab.engine.source.source_for), so no caller branches on the name."""
from __future__ import annotations

from chatlab._thirdparty import LoaderOption
from chatlab.backends.registry import DEFAULT_BACKEND, check_choice, load_backend, speculation_options
from chatlab.engine.engine import ChatEngine
from chatlab.engine.source import refuse_loop_speedups
from chatlab.generate import Speculation
from chatlab.render.resolve import TemplateChoice


def load_engine(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                weight_format: str | None = None, template: "TemplateChoice" = None,
                precision: str | None = None, speculate: "Speculation | None" = None,
                reuse_prefix: bool = False, **options: LoaderOption) -> ChatEngine:
    """A ready engine for `model` on `backend` (options: the backend's, see the registry; and
    chatlab's loop's `speculate` and `reuse_prefix`, see chatlab.engine.source.LoopSource;
    `precision` None: f32, or the fast profile's with `fast=True`, see chatlab.backends.fast)."""
    if speculate is not None:
        options = speculation_options(backend, options)
    spec, weight_format = check_choice(backend, weight_format, options)
    if spec.source == "batched":
        refuse_loop_speedups(backend, speculate, reuse_prefix)  # before a slow load
    loaded = load_backend(model, backend, weight_format, precision, **options)
    return ChatEngine(loaded, model, template, speculate=speculate, reuse_prefix=reuse_prefix)
