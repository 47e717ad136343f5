"""Inference precision, explicit (f32 unless bf16 is asked for) and reported as the runtime applied
it; what the CPU offers; the fast profile (bf16, u8 KV cache, dynamic quantization, int4)."""
from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from chatlab._thirdparty import Jsonable, LoaderOption, OVCompiled
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.protocols import AnyBackend, CompiledBackend, ProfiledBackend

PRECISIONS = ["f32", "bf16"]
DEFAULT_PRECISION = "f32"
ALIASES = {"f32": "f32", "fp32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16"}
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# the flags a stored result records beside its numbers (they decide bf16 and int8 speed)
REPORTED_FLAGS = ["avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]


def normalize_precision(precision: str | None) -> str:
    """The canonical name ("f32" or "bf16"); None means the default, f32."""
    if precision is None:
        return DEFAULT_PRECISION
    name = ALIASES.get(str(precision).strip().lower())
    if name is None:
        raise UnknownNameError("inference precision", str(precision), PRECISIONS)
    return name


@dataclass(frozen=True)
class CPU:
    """The CPU's model, flags, usable threads, native bf16, and OpenVINO's default precision."""
    model: str
    flags: frozenset[str]
    threads: int
    bf16: bool
    default_precision: str | None = None

    def record(self) -> dict[str, Jsonable]:
        return {"model": self.model, "flags": [f for f in REPORTED_FLAGS if f in self.flags],
                "threads": self.threads, "bf16": self.bf16}


def flags_say_bf16(flags: Iterable[str]) -> bool:
    """Whether kernel flags (all of them, or a stored result's REPORTED_FLAGS) include bf16 compute."""
    return not set(BF16_FLAGS).isdisjoint(flags)


def parse_cpuinfo(text: str) -> tuple[str | None, frozenset[str]]:
    """The model name (or None) and flags of the first processor in /proc/cpuinfo's text."""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    return (model.group(1).strip() if model else None,
            frozenset(flags.group(1).split()) if flags else frozenset())


def read_cpu() -> CPU:
    """/proc/cpuinfo, the scheduler's affinity, and OpenVINO's bf16 capability (else the flags)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the platform names the CPU, OpenVINO still knows bf16
        text = ""
    model, flags = parse_cpuinfo(text)
    try:
        threads = len(os.sched_getaffinity(0))  # the cores this process may run on
    except AttributeError:
        threads = os.cpu_count() or 1
    try:
        import openvino as ov

        core = ov.Core()
        bf16 = "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        default: str | None = type_name(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
    except Exception:  # noqa: BLE001 - no OpenVINO or no CPU plugin: the kernel's flags say it
        bf16, default = flags_say_bf16(flags), None
    return CPU(model or platform.processor() or "unknown CPU", flags, threads, bf16, default)


@lru_cache(maxsize=1)
def cpu() -> CPU:
    """This CPU, read once per process (the one place chatlab reads it)."""
    return read_cpu()


def cpu_info() -> dict[str, Jsonable]:
    return cpu().record()


def cpu_has_bf16() -> bool:
    return cpu().bf16


def check_precision(precision: str | None) -> str:
    """Normalized; bf16 on a CPU without it is refused (a silent f32 would make benchmarks lie)."""
    name = normalize_precision(precision)
    if name == "bf16" and not cpu().bf16:
        raise ChatlabError(f"bf16 inference precision needs a CPU with {' or '.join(BF16_FLAGS)}; this one "
                           f"({cpu().model}) has neither, so bf16 would only be emulated. Use --precision "
                           "f32 (the default) here, or run on a CPU with bf16 support.")
    return name


def type_name(value: object) -> str:
    """OpenVINO reports precisions as `ov.Type` (<Type: 'float32'>); chatlab says f32 / bf16."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return normalize_precision(name) if name.lower() in ALIASES else name


KV_CACHE_PRECISIONS = ("f32", "f16", "bf16", "u8")


def ov_config(precision: str, threads: int | None = None,
              kv_cache_precision: str | None = None,
              dynamic_quantization: bool | None = None) -> dict[str, Jsonable]:
    """The compile properties every OpenVINO engine gets: at f32, unless asked otherwise, an f32
    KV cache and no dynamic activation quantization (either alone moves greedy tokens)."""
    config: dict[str, Jsonable] = {"INFERENCE_PRECISION_HINT": precision}
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    if kv_cache_precision is not None and kv_cache_precision not in KV_CACHE_PRECISIONS:
        raise ChatlabError(f"unknown KV cache precision {kv_cache_precision!r}; use one of "
                           f"{', '.join(KV_CACHE_PRECISIONS)} (or leave it unset: f32 at f32)")
    kv = kv_cache_precision or ("f32" if precision == "f32" else None)
    if kv:
        config["KV_CACHE_PRECISION"] = kv
    if dynamic_quantization is False or (dynamic_quantization is None and precision == "f32"):
        config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = 0
    return config


def compiled_facts(compiled: OVCompiled) -> dict[str, Jsonable]:
    """What a compiled model runs at: precision, threads, KV cache, dynamic quantization group."""
    facts: dict[str, Jsonable] = {"precision": type_name(compiled.get_property("INFERENCE_PRECISION_HINT"))}
    for key, name, read in (("threads", "INFERENCE_NUM_THREADS", int),
                            ("kv_cache", "KV_CACHE_PRECISION", type_name),
                            ("dynamic_quantization_group", "DYNAMIC_QUANTIZATION_GROUP_SIZE", int)):
        try:
            facts[key] = read(compiled.get_property(name))
        except Exception:  # noqa: BLE001 - a plugin without the property
            facts[key] = None
    return facts


FAST_KV_CACHE = "u8"
FAST_WEIGHTS = "int4"
# backends whose loader takes the KV cache's precision and dynamic quantization
OPENVINO_BACKENDS = ("openvino", "genai")


def fast_weight_format(weight_formats: tuple[str, ...], default: str) -> str:
    """int4 where the backend has it, else its default (torch runs its stored fp32 weights)."""
    return FAST_WEIGHTS if FAST_WEIGHTS in weight_formats else default


def fast_choices(backend: str, weight_format: str, precision: str | None,
                 options: dict[str, LoaderOption]) -> tuple[str, dict[str, LoaderOption], list[str]]:
    """The fast profile's precision and options (explicit ones kept), and what it could not do."""
    notes: list[str] = []
    if precision is None:
        here = cpu()
        precision = "bf16" if here.bf16 else "f32"
        if not here.bf16:
            notes.append(f"bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES on "
                         f"{here.model}, so the arithmetic stays f32")
    out = dict(options)
    if backend in OPENVINO_BACKENDS:
        out.setdefault("kv_cache_precision", FAST_KV_CACHE)
        out.setdefault("dynamic_quantization", True)
        if out["dynamic_quantization"] is False:
            notes.append("dynamic activation quantization off (speculation's verify pass needs "
                         "it off, or it was asked off)")
    else:
        notes.append(f"the {backend} backend has no u8 KV cache or dynamic quantization")
    if weight_format != FAST_WEIGHTS:
        notes.append(f"{weight_format} weights, not {FAST_WEIGHTS}")
    return precision, out, notes


def compute_line(backend: AnyBackend) -> str:
    """What a loaded backend computes with, as its runtime reports it, and the profile's notes."""
    parts = [f"{backend.name} at {backend.precision}"]
    if isinstance(backend, CompiledBackend):
        facts = compiled_facts(backend.compiled)
        group = facts["dynamic_quantization_group"]
        parts.append(f"KV cache {facts['kv_cache'] or '?'}")
        parts.append(f"dynamic activation quantization group {group}" if group else
                     "no dynamic activation quantization")
    return ", ".join(parts + list(backend.compute_notes if isinstance(backend, ProfiledBackend) else ()))
