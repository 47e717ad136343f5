"""The fast profile: what this CPU offers for speed, each choice named, beside the exact default.

chatlab's default computes exactly (f32 arithmetic, f32 activations into every matmul, an f32 KV
cache), so its greedy replies match PyTorch's fp32. `fast=True` (`--fast` on the command line)
trades that for speed with everything the CPU plugin offers:

* bf16 arithmetic where the plugin lists BF16 in its OPTIMIZATION_CAPABILITIES (f32 where it
  does not, and the fallback is said in the notes, never silently);
* a u8 KV cache (a quarter of the f32 cache's memory traffic per step);
* dynamic activation quantization: the plugin quantizes activations to 8 bits in groups before
  an int8/int4-weight matmul and multiplies integers, as llama.cpp does with q8_1 activations;
* int4 weights (the weight format, unless one is given).

Any value given explicitly wins over the profile's (`fast=True, weight_format="int8"` keeps
int8 weights; `precision="f32"` keeps f32 arithmetic). Speculation needs dynamic quantization
off, so with `speculate` the profile leaves it off and says so. What the profile costs in
accuracy is measured by `chatlab bench accuracy`, not assumed.
"""
from __future__ import annotations

from chatlab._thirdparty import LoaderOption
from chatlab.backends.precision import compiled_facts, cpu_has_bf16, cpu_info

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
        if cpu_has_bf16():
            precision = "bf16"
        else:
            precision = "f32"
            notes.append(f"bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES on "
                         f"{cpu_info()['model']}, so the arithmetic stays f32")
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


def compute_line(backend: object) -> str:
    """What a loaded backend really computes with, read back from its runtime where it says
    (an OpenVINO compiled model's properties), and the fast profile's notes."""
    parts = [f"{getattr(backend, 'name', 'backend')} at {getattr(backend, 'precision', '?')}"]
    compiled = getattr(backend, "compiled", None)
    if compiled is not None:
        facts = compiled_facts(compiled)
        group = facts["dynamic_quantization_group"]
        parts.append(f"KV cache {facts['kv_cache'] or '?'}")
        parts.append(f"dynamic activation quantization group {group}" if group else
                     "no dynamic activation quantization")
    return ", ".join(parts + list(getattr(backend, "compute_notes", [])))
