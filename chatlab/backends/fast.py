"""The fast profile: what this CPU offers for speed, each choice named, beside the exact default.

chatlab's default computes exactly (f32 arithmetic, f32 activations, an f32 KV cache), so its
greedy replies match PyTorch's fp32. `fast=True` (`--fast`) trades that for speed: bf16
arithmetic where the CPU plugin lists BF16 in its OPTIMIZATION_CAPABILITIES (else f32, said in
the notes), a u8 KV cache, dynamic activation quantization, and int4 weights.

Any value given explicitly wins over the profile's. Speculation needs dynamic quantization off,
so with `speculate` the profile leaves it off and says so. What the profile costs in accuracy
is measured by `chatlab bench accuracy`.
"""
from __future__ import annotations

from chatlab._thirdparty import LoaderOption
from chatlab.backends.precision import compiled_facts, cpu
from chatlab.protocols import AnyBackend, CompiledBackend, ProfiledBackend

KV_CACHE = "u8"
WEIGHTS = "int4"
# backends whose loader takes the KV cache's precision and dynamic quantization
OPENVINO_BACKENDS = ("openvino", "genai")


def fast_weight_format(weight_formats: tuple[str, ...], default: str) -> str:
    """int4 where the backend has it, else its default (torch runs its stored fp32 weights)."""
    return WEIGHTS if WEIGHTS in weight_formats else default


def fast_choices(backend: str, weight_format: str, precision: str | None,
                 options: dict[str, LoaderOption]) -> tuple[str, dict[str, LoaderOption], list[str]]:
    """The precision and loader options of the fast profile on `backend`, and notes saying what
    it could not turn on here and why. `options` given explicitly are kept."""
    notes: list[str] = []
    if precision is None:
        here = cpu()
        precision = "bf16" if here.bf16 else "f32"
        if not here.bf16:
            notes.append(f"bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES on "
                         f"{here.model}, so the arithmetic stays f32")
    out = dict(options)
    if backend in OPENVINO_BACKENDS:
        out.setdefault("kv_cache_precision", KV_CACHE)
        out.setdefault("dynamic_quantization", True)
        if out["dynamic_quantization"] is False:
            notes.append("dynamic activation quantization off (speculation's verify pass needs "
                         "it off, or it was asked off)")
    else:
        notes.append(f"the {backend} backend has no u8 KV cache or dynamic quantization")
    if weight_format != WEIGHTS:
        notes.append(f"{weight_format} weights, not {WEIGHTS}")
    return precision, out, notes


def compute_line(backend: AnyBackend) -> str:
    """What a loaded backend really computes with, read back from its runtime where it says
    (an OpenVINO compiled model's properties), and the fast profile's notes."""
    parts = [f"{backend.name} at {backend.precision}"]
    if isinstance(backend, CompiledBackend):
        facts = compiled_facts(backend.compiled)
        group = facts["dynamic_quantization_group"]
        parts.append(f"KV cache {facts['kv_cache'] or '?'}")
        parts.append(f"dynamic activation quantization group {group}" if group else
                     "no dynamic activation quantization")
    return ", ".join(parts + list(backend.compute_notes if isinstance(backend, ProfiledBackend) else ()))
