"""The engines of `chatlab bench`: the rows `--engines` names and, per runtime, the engine that
loads and times it: the same prompt ids, exactly `n` greedy tokens, at the same precision."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Protocol

from chatlab import backends
from chatlab._thirdparty import Jsonable, LoaderOption, OVCompiled
from chatlab.backends.export import export_model
from chatlab.backends.precision import DEFAULT_PRECISION, compiled_facts, fast_choices, ov_config
from chatlab.backends.registry import REGISTRY, check_choice, speculation_options
from chatlab.errors import UnknownNameError
from chatlab.generate import Finished, SamplingParams, generate
from chatlab.generate.speculate import Speculation, prepare
from chatlab.lab.bench import llamacpp
from chatlab.lab.bench.timing import Stamp, Timing, from_stamps
from chatlab.models import load_model
from chatlab.protocols import CompiledBackend, ProfiledBackend

if TYPE_CHECKING:
    import torch

# default: with no --engines; extra: only when named; speculative: added by --speculate alone
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
    options: dict[str, LoaderOption] = field(default_factory=dict)
    prompt_lookup: bool = False  # speculative: prompt-lookup drafts (chatlab's, or genai's own)

    @property
    def takes_drafts(self) -> bool:
        """Whether `--speculate`'s draft settings are passed to this row."""
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


LLAMA_CPP = llamacpp.ENGINE
ENGINE_ROWS: dict[str, EngineRow] = {r.name: r for r in [
    _row("chatlab-torch", "torch", "fp32"),
    _row("hf-generate", "hf-generate", "fp32"),
    _row("chatlab-openvino-fp32", "openvino", "fp32"),
    _row("chatlab-openvino-int8", "openvino", "int8"),
    _row("chatlab-openvino-int4", "openvino", "int4"),
    _row("optimum-int8", "optimum", "int8"),
    _row("genai-int8", "genai-pipeline", "int8"),
    _row(LLAMA_CPP, "llama.cpp", "q4_1"),
    # SDPA attention instead of the paged-attention rewrite: what the rewrite gains
    _row("chatlab-openvino-int8-sdpa", "openvino", "int8", "extra", attention="sdpa"),
    _row("genai-int8-sdpa", "genai-pipeline", "int8", "extra", attention="SDPA"),
    # prompt lookup; its control compiled alike (exact speculation needs dynamic quantization off)
    _row("chatlab-openvino-int8-pl", "openvino", "int8", "speculative", True, dynamic_quantization=False),
    _row("chatlab-openvino-int8-nodq", "openvino", "int8", "speculative", dynamic_quantization=False),
    _row("genai-int8-pl", "genai-pipeline", "int8", "speculative", True),
    _row("chatlab-openvino-int4-pl", "openvino", "int4", "int4", True, dynamic_quantization=False),
    _row("genai-int4", "genai-pipeline", "int4", "int4"),
    _row("genai-int4-pl", "genai-pipeline", "int4", "int4", True),
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


ENGINES = engine_names("default")
BASELINE = "genai-int8"
SPECULATIVE_ENGINES = engine_names("speculative")  # what --speculate alone adds
# the fast profile's rows, genai's first (the anchor of their pairs), then llama.cpp at q4_1
FAST_ENGINES = ["genai-fast", "chatlab-fast", "chatlab-fast-pl", LLAMA_CPP]
EXTRA_ENGINES = engine_names("extra", "speculative", "int4", "fast")


class BenchEngine(Protocol):
    """What the bench's worker drives: load once, tell the arithmetic it runs, time a run of exactly
    n new tokens (with `stop_at_eos`, at most n, ending at the model's end token)."""

    def load(self) -> None: ...
    def facts(self) -> dict[str, Jsonable]: ...
    def run(self, ids: list[int], n: int, stop_at_eos: bool = False) -> Timing: ...


def ov_compute(compiled: OVCompiled) -> str:
    """Besides the precision hint, what decides OpenVINO's arithmetic: KV cache, activation quantization."""
    try:
        group = str(compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE"))
    except Exception:  # noqa: BLE001 - an older plugin without the property
        group = "?"
    dyn = f"dynamic activation quantization group {group}" if group not in ("0", "?") else "no dynamic quantization"
    return f"KV cache {compiled_facts(compiled)['kv_cache'] or '?'}, {dyn}"


class ChatlabLoop:
    """chatlab's own loop (`chatlab.generate.generate`) over a torch or OpenVINO backend."""

    def __init__(self, model: str, backend: str, weight_format: str,
                 precision: str = DEFAULT_PRECISION, attention: str | None = None,
                 speculate: dict[str, int] | None = None, dynamic_quantization: bool | None = None,
                 fast: bool = False) -> None:
        self.args = (model, backend, weight_format)
        self.precision: str | None = None if fast else precision  # the fast profile picks its own
        self.attention, self.fast = attention, fast
        self.speculate = None if speculate is None else Speculation(
            draft_tokens=speculate["draft_tokens"], ngram=speculate["ngram"])
        self.dynamic_quantization = dynamic_quantization  # None: the precision's default (off at f32)

    def load(self) -> None:
        options: dict[str, LoaderOption] = {"attention": self.attention} if self.attention else {}
        if self.dynamic_quantization is not None:
            options["dynamic_quantization"] = self.dynamic_quantization
        if self.fast:
            options["fast"] = True
        if self.speculate is not None:
            options = speculation_options(self.args[1], options)
        self.backend = backends.load_step_backend(*self.args, precision=self.precision, **options)
        if self.speculate is not None:
            prepare(self.backend, self.speculate)  # at load, not inside a timed reply

    def facts(self) -> dict[str, Jsonable]:
        facts = {"precision": self.backend.precision, "threads": self.backend.threads}
        notes = ""
        if isinstance(self.backend, ProfiledBackend):
            notes = "".join(f"; {n}" for n in self.backend.compute_notes)
        if isinstance(self.backend, CompiledBackend):
            facts["compute"] = ov_compute(self.backend.compiled) + notes
        elif notes:
            facts["compute"] = notes[2:]
        return facts

    def run(self, ids: list[int], n: int, stop_at_eos: bool = False) -> Timing:
        fin = list(generate(self.backend, ids, SamplingParams(max_new_tokens=n, ignore_eos=not stop_at_eos),
                            speculate=self.speculate))[-1]
        assert isinstance(fin, Finished)
        ttft, total = fin.timings["ttft_s"], fin.timings["total_s"]
        decode = (fin.completion_tokens - 1) / (total - ttft) if fin.completion_tokens > 1 else 0.0
        spec = None
        if fin.speculation is not None:  # passes after prefill: a token each, less the accepted ones
            after_first = fin.completion_tokens - 1
            passes = max(after_first - int(fin.speculation["accepted_tokens"]), 1)
            spec = {"tokens_per_step": after_first / passes, **fin.speculation}
        return Timing(ttft, decode, fin.token_ids, spec)


class StampStreamer:
    """A transformers streamer that only records when new tokens arrive and how many."""

    def __init__(self) -> None:
        self.stamps: list[Stamp] = []
        self.prompt_seen = False

    def put(self, value: "torch.Tensor") -> None:
        if not self.prompt_seen:  # generate() first "streams" the prompt itself
            self.prompt_seen = True
            return
        self.stamps.append((time.perf_counter(), int(value.numel())))  # one sequence: its new ids

    def end(self) -> None:
        pass


class HFGenerate:
    """`model.generate()` of transformers (PyTorch) or optimum-intel (OpenVINO)."""

    def __init__(self, model: str, optimum_format: str | None = None,
                 precision: str = DEFAULT_PRECISION) -> None:
        self.model_name, self.optimum_format, self.precision = model, optimum_format, precision

    def load(self) -> None:
        if self.optimum_format:
            from optimum.intel import OVModelForCausalLM

            self.model = OVModelForCausalLM.from_pretrained(
                export_model(self.model_name, self.optimum_format), ov_config=ov_config(self.precision))
        else:
            import torch

            self.model, _ = load_model(self.model_name)
            if self.precision == "bf16":
                self.model = self.model.to(torch.bfloat16)

    def facts(self) -> dict[str, Jsonable]:
        if self.optimum_format:
            compiled = self.model.request.get_compiled_model()
            return {**compiled_facts(compiled), "compute": ov_compute(compiled)}
        import torch

        dtype = next(self.model.parameters()).dtype
        return {"precision": "bf16" if dtype == torch.bfloat16 else "f32", "threads": torch.get_num_threads()}

    def run(self, ids: list[int], n: int, stop_at_eos: bool = False) -> Timing:
        import torch

        inputs = torch.tensor([ids])
        streamer = StampStreamer()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(inputs, attention_mask=torch.ones_like(inputs), do_sample=False,
                                      max_new_tokens=n, min_new_tokens=0 if stop_at_eos else n, streamer=streamer,
                                      pad_token_id=self.model.config.eos_token_id)
        return from_stamps(t0, streamer.stamps, out[0, len(ids):].tolist())


class GenAI:
    """openvino-genai's `LLMPipeline` on the same int8 export, fed ids (no templating)."""

    def __init__(self, model: str, weight_format: str = "int8", attention: str | None = None,
                 precision: str = DEFAULT_PRECISION, prompt_lookup: dict[str, int] | None = None,
                 fast: bool = False) -> None:
        self.model_name, self.weight_format, self.attention = model, weight_format, attention
        self.precision, self.prompt_lookup = precision, prompt_lookup
        self.kv_cache: str | None = None
        self.dynamic_quantization: bool | None = None
        self.notes: list[str] = []
        if fast:  # the settings chatlab's fast profile gives its own loop
            options: dict[str, LoaderOption] = {"dynamic_quantization": False} if prompt_lookup else {}
            self.precision, chosen, self.notes = fast_choices("genai", weight_format, None, options)
            self.kv_cache = str(chosen["kv_cache_precision"])
            self.dynamic_quantization = bool(chosen["dynamic_quantization"])
            self.notes.insert(0, "fast profile")

    def load(self) -> None:
        import openvino_genai as genai

        # genai passes these properties on to the CPU plugin, the same as chatlab's loop gets
        options: dict[str, Jsonable] = ov_config(self.precision, kv_cache_precision=self.kv_cache,
                                                 dynamic_quantization=self.dynamic_quantization)
        if self.attention:
            options["ATTENTION_BACKEND"] = self.attention
        # no prefix caching (the bench repeats its prompts; chatlab's loop caches nothing), no prefill cap
        scheduler = genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False
        scheduler.max_num_batched_tokens = 2**31 - 1
        options["scheduler_config"] = scheduler
        if self.prompt_lookup is not None:
            options["prompt_lookup"] = True  # genai's own n-gram drafts, verified in one pass
        self.pipe = genai.LLMPipeline(str(export_model(self.model_name, self.weight_format)), "CPU",
                                      **options)

    def facts(self) -> dict[str, Jsonable]:
        # LLMPipeline does not expose its compiled model: this is what it was given.
        lookup = "" if self.prompt_lookup is None else (
            f"; prompt lookup, {self.prompt_lookup['draft_tokens']} tokens per draft, "
            f"n-grams up to {self.prompt_lookup['ngram']}")
        asked = "".join(f"; {n}" for n in self.notes)
        if self.kv_cache:
            asked += f"; KV cache {self.kv_cache} and dynamic quantization " + (
                "on" if self.dynamic_quantization else "off") + " asked"
        return {"precision": self.precision, "threads": None,
                "compute": "CPU plugin defaults as the OpenVINO rows (not readable from genai); "
                           "prefix caching off" + lookup + asked}

    def run(self, ids: list[int], n: int, stop_at_eos: bool = False) -> Timing:
        import numpy as np
        import openvino as ov
        import openvino_genai as genai

        stamps: list[Stamp] = []
        tokens: list[int] = []

        class Stamper(genai.StreamerBase):
            # one id per write in plain decoding; with prompt lookup, the list a verify pass accepted
            def write(self, token: int | list[int]) -> object:
                new = token if isinstance(token, list) else [token]
                stamps.append((time.perf_counter(), len(new)))
                tokens.extend(new)
                return genai.StreamingStatus.RUNNING

            def end(self) -> None:
                pass

        config = genai.GenerationConfig(max_new_tokens=n, min_new_tokens=0 if stop_at_eos else n,
                                        do_sample=False, ignore_eos=not stop_at_eos,
                                        apply_chat_template=False)
        if self.prompt_lookup is not None:
            config.num_assistant_tokens = self.prompt_lookup["draft_tokens"]
            config.max_ngram_size = self.prompt_lookup["ngram"]
        inputs = ov.Tensor(np.asarray([ids], dtype=np.int64))
        t0 = time.perf_counter()
        self.pipe.generate(inputs, config, Stamper())
        return from_stamps(t0, stamps, tokens)


def unavailable(name: str, precision: str = DEFAULT_PRECISION) -> str | None:
    """Why engine `name` cannot run here, or None (checked before any worker starts)."""
    return llamacpp.unavailable(precision) if get_engine(name).runtime == "llama.cpp" else None


Drafts = dict[str, int]
# Drafts when the run names none: chatlab's loop's defaults; genai's, those of every stored run.
CHATLAB_SPECULATION: Drafts = {"draft_tokens": Speculation.draft_tokens, "ngram": Speculation.ngram}
GENAI_SPECULATION: Drafts = {"draft_tokens": 4, "ngram": 3}


def _chatlab_loop(row: EngineRow, model: str, precision: str, drafts: Drafts | None) -> ChatlabLoop:
    return ChatlabLoop(model, row.runtime, row.weight_format, precision, attention=row.options.get("attention"),
                       speculate=drafts, dynamic_quantization=row.options.get("dynamic_quantization"),
                       fast=bool(row.options.get("fast")))


def _genai_pipeline(row: EngineRow, model: str, precision: str, drafts: Drafts | None) -> GenAI:
    return GenAI(model, row.weight_format, attention=row.options.get("attention"), precision=precision,
                 prompt_lookup=drafts, fast=bool(row.options.get("fast")))


LOADERS: dict[str, Callable[[EngineRow, str, str, Drafts | None], BenchEngine]] = {
    "torch": _chatlab_loop, "openvino": _chatlab_loop,
    "hf-generate": lambda row, model, precision, _: HFGenerate(model, None, precision),
    "optimum": lambda row, model, precision, _: HFGenerate(model, row.weight_format, precision),
    "genai-pipeline": _genai_pipeline,
    "llama.cpp": lambda row, model, precision, _: llamacpp.LlamaCpp(model, precision)}


def make_engine(name: str, model: str, precision: str = DEFAULT_PRECISION,
                speculate: Drafts | None = None) -> BenchEngine:
    """The bench engine for a registry row; `speculate` sets the drafts of prompt-lookup rows."""
    row = get_engine(name)
    default = GENAI_SPECULATION if row.runtime == "genai-pipeline" else CHATLAB_SPECULATION
    drafts = (speculate or default) if row.prompt_lookup else None
    return LOADERS[row.runtime](row, model, precision, drafts)
