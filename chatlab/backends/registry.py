"""The one table of chatlab's backends: loader, token source, weight formats, options (each a CLI flag)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from chatlab._thirdparty import LoaderOption
from chatlab.backends import genai as genai_backend, openvino as openvino_backend, torch as torch_backend
from chatlab.backends.export import WEIGHT_FORMATS
from chatlab.backends.precision import check_precision, fast_choices, fast_weight_format
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.models.memory import drop_page_cache
from chatlab.protocols import AnyBackend, ProfiledBackend, StepBackend

Source = Literal["loop", "batched"]


@dataclass(frozen=True)
class Option:
    """A loader keyword option, and its CLI flag (`--` + the name with dashes)."""

    name: str
    type: Callable[[str], LoaderOption]
    default: LoaderOption
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class BackendSpec:
    name: str
    summary: str
    source: Source  # "loop": chatlab's loop drives prefill/step; "batched": the backend batches
    weight_formats: tuple[str, ...]
    default_weight_format: str
    loader: Callable[..., AnyBackend] = field(repr=False)  # (model, weight_format, precision, **options)
    options: tuple[Option, ...] = ()

    def option_names(self) -> set[str]:
        return {o.name for o in self.options}


THREADS = Option("threads", int, None, "compute threads (default: the runtime's choice)")
# A switch (a flag without a value): the fast profile of chatlab.backends.precision, on every backend
FAST = Option("fast", bool, False, "trade exactness for speed with what this CPU offers: bf16 "
              "where the CPU plugin has it, a u8 KV cache, dynamic activation quantization, int4 "
              "weights (any of them given explicitly wins; what it falls back from is printed). "
              "Its accuracy cost: chatlab bench accuracy")


def on_off(value: str) -> bool:
    """"on" or "off" as a bool (ValueError naming the two for anything else)."""
    if value not in ("on", "off"):
        raise ValueError(f"{value!r}: use on or off")
    return value == "on"


REGISTRY: dict[str, BackendSpec] = {s.name: s for s in [
    # each loader looks its module's `load` up when called (tests replace it)
    BackendSpec("torch", "chatlab's loop over PyTorch (transformers), the weights as stored", "loop",
                ("fp32",), "fp32", lambda m, w, p, **o: torch_backend.load(m, precision=p, **o),
                (THREADS, FAST)),
    # The default: the fastest path that is still exact (int8 weights, f32 math).
    BackendSpec("openvino", "chatlab's loop over an OpenVINO export (int8 weights at f32 by default; "
                "exported on first use)", "loop", ("fp32", "int8", "int4"), "int8",
                lambda m, w, p, **o: openvino_backend.load(m, w, precision=p, **o),
                (THREADS, FAST,
                 Option("attention", str, "paged", "openvino: the attention graph, paged (the "
                        "paged-attention rewrite) or sdpa (the stateful graph as exported)",
                        ("paged", "sdpa")),
                 Option("kv_cache_precision", str, None, "openvino: the KV cache's precision "
                        "(default: the arithmetic's, f32 at f32)"),
                 Option("dynamic_quantization", on_off, None, "openvino: on or off, the CPU "
                        "plugin's int8 activation quantization in int8/int4-weight matmuls (off "
                        "at f32 by default for exact answers; on trades that for speed; "
                        "--speculate needs it off)"))),
    BackendSpec("genai", "openvino-genai continuous batching: several requests at once", "batched",
                ("fp32", "int8", "int4"), "int8",
                lambda m, w, p, **o: genai_backend.load(m, w, precision=p, **o),
                (THREADS, FAST,
                 Option("max_seqs", int, 8, "genai: sequences generated at once (requests beyond "
                        "wait in the queue)"),
                 Option("cache_gb", float, 1.0, "genai: GB of paged KV cache"),
                 Option("prefix_caching", on_off, None, "genai: on or off, its prefix caching "
                        "(off by default; --reuse-prefix turns it on)"))),
]}
DEFAULT_BACKEND = "openvino"


def get_spec(name: str) -> BackendSpec:
    if name not in REGISTRY:
        raise UnknownNameError("backend", name, list(REGISTRY))
    return REGISTRY[name]


def check_choice(backend: str, weight_format: str | None, options: dict[str, LoaderOption]) -> tuple[BackendSpec, str]:
    """The backend's spec and weight format, every name and option checked (before any slow load)."""
    spec = get_spec(backend)
    if weight_format is None and options.get("fast"):
        weight_format = fast_weight_format(spec.weight_formats, spec.default_weight_format)
    weight_format = weight_format or spec.default_weight_format
    if weight_format not in WEIGHT_FORMATS:
        raise UnknownNameError("weight format", weight_format, WEIGHT_FORMATS)
    if weight_format not in spec.weight_formats:
        raise UnknownNameError(f"weight format for the {backend} backend", weight_format, list(spec.weight_formats))
    unknown = sorted(set(options) - spec.option_names())
    if unknown:
        raise ChatlabError(f"the {backend} backend takes no option {', '.join(unknown)}; its options: "
                           f"{', '.join(sorted(spec.option_names())) or 'none'}")
    for opt in spec.options:
        value = options.get(opt.name)
        if opt.choices and value is not None and value not in opt.choices:
            raise UnknownNameError(opt.name.replace("_", " "), value, list(opt.choices))
    return spec, weight_format


def speculation_options(backend: str, options: dict[str, LoaderOption]) -> dict[str, LoaderOption]:
    """Options for a backend that will speculate: dynamic quantization off unless asked for."""
    if "dynamic_quantization" in get_spec(backend).option_names():
        return {"dynamic_quantization": False, **options}
    return options


def load_backend(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                 weight_format: str | None = None, precision: str | None = None,
                 **options: LoaderOption) -> AnyBackend:
    """A ready backend by name (see REGISTRY for each one's options)."""
    spec, weight_format = check_choice(backend, weight_format, options)
    if not options.pop("fast", False):
        loaded = spec.loader(model, weight_format, check_precision(precision), **options)
    else:
        precision, options, notes = fast_choices(spec.name, weight_format, precision, options)
        loaded = spec.loader(model, weight_format, check_precision(precision), **options)
        assert isinstance(loaded, ProfiledBackend)
        loaded.compute_notes = ("fast profile", *notes)  # read by the bench's facts and `--fast`'s line
    drop_page_cache()  # the weights are in the model now; under a limit their file cache counts
    return loaded


def load_step_backend(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                      weight_format: str | None = None, precision: str | None = None,
                      **options: LoaderOption) -> StepBackend:
    """A backend chatlab's loop can drive (prefill/step); a batched one is refused by name."""
    if get_spec(backend).source != "loop":
        raise ChatlabError(f"the {backend} backend batches sequences itself and has no prefill/step "
                           "for chatlab's loop; load it with chatlab.engine.load_engine, or pick one "
                           f"of {', '.join(n for n, s in REGISTRY.items() if s.source == 'loop')}")
    loaded = load_backend(model, backend, weight_format, precision, **options)
    assert isinstance(loaded, StepBackend)
    return loaded


def every_option() -> list[Option]:
    """Each loader option of the registry once, in table order (the CLI gives each one flag)."""
    seen: dict[str, Option] = {}
    for spec in REGISTRY.values():
        for opt in spec.options:
            seen.setdefault(opt.name, opt)
    return list(seen.values())


def options_for(backend: str, given: dict[str, LoaderOption]) -> dict[str, LoaderOption]:
    """`given` checked against `backend`: another backend's option is an error naming its flag."""
    spec = get_spec(backend)
    foreign = sorted(set(given) - spec.option_names())
    if foreign:
        flags = ", ".join("--" + n.replace("_", "-") for n in foreign)
        raise ChatlabError(f"{flags} does not apply to --backend {spec.name}; its options: "
                           + (", ".join(o.flag for o in spec.options) or "none"))
    return given
