"""The named engine configurations: every name `chatlab bench --engines` takes.

A row's `runtime` is either a backend of REGISTRY (its options checked by `check_choice` when
this table is built, so a row cannot carry a flag the CLI would refuse), or one of the
REFERENCES: runtimes chatlab does not serve and only times against its own loop. The bench
(chatlab.lab.bench.engines) holds one loader per runtime name and nothing per row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from chatlab._thirdparty import LoaderOption
from chatlab.backends.registry import REGISTRY, check_choice
from chatlab.errors import UnknownNameError

# default: `chatlab bench` with no --engines; extra: only when named; speculative: also added
# by --speculate alone; int4: the same at int4 weights, for equal bits with llama.cpp's q4_1;
# fast: the fast profile (chatlab.backends.fast) on chatlab's loop and genai, beside llama.cpp
Group = Literal["default", "extra", "speculative", "int4", "fast"]


@dataclass(frozen=True)
class Reference:
    """A runtime the bench times chatlab against; chatlab never serves it."""

    name: str
    summary: str
    weight_formats: tuple[str, ...]


REFERENCES: dict[str, Reference] = {r.name: r for r in [
    Reference("hf-generate", "transformers' model.generate() on PyTorch", ("fp32",)),
    Reference("optimum", "optimum-intel's OVModelForCausalLM.generate() on the OpenVINO export", ("int8",)),
    Reference("genai-pipeline", "openvino-genai's LLMPipeline on the OpenVINO export, fed ids",
              ("int8", "int4")),
    Reference("llama.cpp", "llama-cpp-python on the shipped GGUF as it is", ("q4_1",)),
]}


@dataclass(frozen=True)
class EngineRow:
    name: str
    runtime: str  # a REGISTRY backend (chatlab's loop) or a REFERENCES runtime
    weight_format: str
    group: Group
    # the runtime's options: for a REGISTRY backend, its loader options by their names
    options: dict[str, LoaderOption] = field(default_factory=dict)
    prompt_lookup: bool = False  # speculative: prompt-lookup drafts (chatlab's, or genai's own)

    @property
    def takes_drafts(self) -> bool:
        """Whether `--speculate`'s draft settings are passed to this row (the speculative rows
        and their int4 and fast counterparts)."""
        return self.group in ("speculative", "int4", "fast")


def _row(name: str, runtime: str, weight_format: str, group: Group = "default",
         prompt_lookup: bool = False, **options: LoaderOption) -> EngineRow:
    if runtime in REGISTRY:
        check_choice(runtime, weight_format, options)  # the CLI's own rule for a backend's options
    elif runtime not in REFERENCES:
        raise UnknownNameError("engine runtime", runtime, [*REGISTRY, *REFERENCES])
    elif weight_format not in REFERENCES[runtime].weight_formats:
        raise UnknownNameError(f"weight format for {runtime}", weight_format,
                               list(REFERENCES[runtime].weight_formats))
    return EngineRow(name, runtime, weight_format, group, dict(options), prompt_lookup)


LLAMA_CPP = "llama.cpp-q4_1"
ENGINE_ROWS: dict[str, EngineRow] = {r.name: r for r in [
    _row("chatlab-torch", "torch", "fp32"),
    _row("hf-generate", "hf-generate", "fp32"),
    _row("chatlab-openvino-fp32", "openvino", "fp32"),
    _row("chatlab-openvino-int8", "openvino", "int8"),
    _row("chatlab-openvino-int4", "openvino", "int4"),
    _row("optimum-int8", "optimum", "int8"),
    _row("genai-int8", "genai-pipeline", "int8"),
    _row(LLAMA_CPP, "llama.cpp", "q4_1"),
    # chatlab's loop and genai each on the exported stateful graph (SDPA attention) instead of
    # its paged-attention rewrite, to show what the rewrite gains
    _row("chatlab-openvino-int8-sdpa", "openvino", "int8", "extra", attention="sdpa"),
    _row("genai-int8-sdpa", "genai-pipeline", "int8", "extra", attention="SDPA"),
    # chatlab's loop with prompt-lookup drafts; its plain loop compiled the same way (dynamic
    # activation quantization off, which exact speculation needs: the control that separates
    # the two effects); genai's own prompt lookup
    _row("chatlab-openvino-int8-pl", "openvino", "int8", "speculative", True, dynamic_quantization=False),
    _row("chatlab-openvino-int8-nodq", "openvino", "int8", "speculative", dynamic_quantization=False),
    _row("genai-int8-pl", "genai-pipeline", "int8", "speculative", True),
    _row("chatlab-openvino-int4-pl", "openvino", "int4", "int4", True, dynamic_quantization=False),
    _row("genai-int4", "genai-pipeline", "int4", "int4"),
    _row("genai-int4-pl", "genai-pipeline", "int4", "int4", True),
    # the fast profile: bf16 where the CPU has it, u8 KV cache, dynamic activation quantization,
    # int4 weights; genai given the same settings (prompt lookup turns dynamic quantization off)
    _row("chatlab-fast", "openvino", "int4", "fast", fast=True),
    _row("chatlab-fast-pl", "openvino", "int4", "fast", True, fast=True),
    _row("genai-fast", "genai-pipeline", "int4", "fast", fast=True),
]}


def engine_names(*groups: Group) -> list[str]:
    """The rows' names in table order (all of them when no group is given)."""
    return [n for n, r in ENGINE_ROWS.items() if not groups or r.group in groups]


def get_engine(name: str) -> EngineRow:
    if name not in ENGINE_ROWS:
        raise UnknownNameError("benchmark engine", name, list(ENGINE_ROWS))
    return ENGINE_ROWS[name]
