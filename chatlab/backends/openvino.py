"""OpenVINO backend: chatlab's own loop over the graph that optimum-intel exports.

The export is *stateful*: the KV cache lives inside the model as state variables and attention
is ScaledDotProductAttention over a mask that grows every step. chatlab runs it two ways:

* `attention="paged"` (the default): the graph rewritten for paged attention, the cache in
  blocks chatlab owns (chatlab.backends.paged). The faster of the two, prefill and decode.
* `attention="sdpa"`: the stateful graph as exported. Inputs are `input_ids`, `attention_mask`
  (covering cache + new tokens), `position_ids` and `beam_idx` (always [0]: one sequence, no
  beam reordering); the state is reset before each prompt. Notebooks 03 and 05 look inside it.

On both, two details decide the speed:

* The graph returns logits for every input position, so a 1,000-token prompt would project
  1,000 × 49,152 floats (196 MB) only to read the last row. At load time we insert a slice in
  front of the output projection so that prefill computes the last position only.
* The per-token Python is kept to a few array writes: the inputs are preallocated and passed
  without copying, and the logits come back as a view of the output tensor.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from chatlab._thirdparty import Decoder, HFTokenizer, Jsonable
from chatlab.backends.base import Backend
from chatlab.backends.exported import ExportedModel
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, compiled_facts, ov_config
from chatlab.backends.slicing import slice_last_position
from chatlab.errors import ChatlabError, UnknownNameError

if TYPE_CHECKING:
    from chatlab.backends.paged import PagedGraph


# How attention runs (see the module's docstring); both give the same greedy tokens (tested).
ATTENTIONS = ["paged", "sdpa"]
DEFAULT_ATTENTION = "paged"


class OpenVINOBackend(Backend):
    def __init__(self, folder: Path, tokenizer: HFTokenizer = None, precision: str = DEFAULT_PRECISION,
                 threads: int | None = None, slice_logits: bool = True, name: str = "openvino",
                 model_name: str | None = None, kv_cache_precision: str | None = None,
                 attention: str = DEFAULT_ATTENTION, dynamic_quantization: bool | None = None) -> None:
        precision = check_precision(precision)
        if attention not in ATTENTIONS:
            raise UnknownNameError("attention", attention, ATTENTIONS)
        # The precision is always passed: left unset, the CPU plugin picks bf16 on bf16 CPUs.
        # ov_config also pins the KV cache to f32 at f32 (the plugin's own choice is u8), and
        # turns the plugin's dynamic quantization of activations off at f32 (None: the
        # precision's default). With it on, a 2-token pass's logits differ from two 1-token
        # steps by up to 1.2 on SmolLM2 int8 (6e-5 with it off, as with fp32 weights), and
        # speculation needs the k-token verify pass to agree with a step (see `exact_extend`).
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
                  **ov_config(precision, threads, kv_cache_precision, dynamic_quantization)}
        self.attention = attention
        self.exported = ExportedModel(folder, model_name, tokenizer)
        self.folder, self.model_name = folder, model_name
        self.context_length = self.exported.context_length
        self._paged: PagedGraph | None = None
        if attention == "paged":
            from chatlab.backends.paged import PagedGraph

            try:
                self._paged = PagedGraph(folder, config, slice_logits)
            except (ValueError, RuntimeError) as e:  # a graph OpenVINO cannot rewrite
                warnings.warn(f"paged attention is not available for {folder.name} ({e}); running "
                              "the stateful graph instead (attention=\"sdpa\")", stacklevel=2)
                self.attention = attention = "sdpa"
        if self._paged is not None:
            self.compiled, self.request, self.sliced = self._paged.compiled, self._paged.request, self._paged.sliced
            self.vocab_size = self._paged.vocab_size
        else:
            self._compile_stateful(folder, config, slice_logits)
        # What the plugin actually applied, not what we asked for: tests and the bench read these.
        facts = compiled_facts(self.compiled)
        self.precision, self.threads = facts["precision"], facts["threads"]
        if self.precision != precision:
            raise ChatlabError(f"OpenVINO compiled the model at {self.precision} although "
                               f"{precision} was asked for; use --precision {self.precision}")
        self.name = name
        self.eos_ids = self.exported.eos_ids
        self.length = 0
        try:
            self.exact_extend = int(self.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) == 0
        except Exception:  # noqa: BLE001 - a plugin without the property quantizes nothing
            self.exact_extend = True

    def _compile_stateful(self, folder: Path, config: dict[str, Jsonable], slice_logits: bool) -> None:
        import openvino as ov

        core = ov.Core()
        model = core.read_model(folder / "openvino_model.xml")
        self.sliced = slice_logits and slice_last_position(model)
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.vocab_size = int(model.output("logits").get_partial_shape()[2].get_length())
        # Preallocated inputs; a decode step only writes two numbers into them.
        self._mask = np.ones((1, self.context_length), dtype=np.int64)
        self._ids = np.zeros((1, 1), dtype=np.int64)
        self._pos = np.zeros((1, 1), dtype=np.int64)
        self._beam = np.zeros((1,), dtype=np.int32)
        self._logits = self.request.get_output_tensor  # bound method, looked up once

    @property
    def tokenizer(self) -> HFTokenizer:
        """The chat tokenizer, loaded on first use (see ExportedModel.tokenizer)."""
        return self.exported.tokenizer

    @property
    def decoder(self) -> Decoder:
        """The light decoder the loop detokenizes with (see ExportedModel.decoder)."""
        return self.exported.decoder

    def reset(self) -> None:
        if self._paged is not None:
            self._paged.reset()
        else:
            self.request.reset_state()
        self.length = 0

    def _run(self, ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
        n = self.length + ids.shape[1]
        self.request.infer({"input_ids": ids, "attention_mask": self._mask[:, :n],
                            "position_ids": pos, "beam_idx": self._beam}, share_inputs=True)
        self.length = n
        return self._logits(0).data[0, -1]  # a view: valid until the next infer

    def prefill(self, ids: list[int]) -> np.ndarray:
        if not ids:
            raise ValueError("prefill needs at least one token")
        if len(ids) >= self.context_length:
            raise ValueError(f"prompt of {len(ids)} tokens exceeds the context of {self.context_length}")
        self.reset()
        if self._paged is not None:
            logits = self._paged.prefill(ids)
            self.length = self._paged.length
            return logits
        arr = np.asarray([ids], dtype=np.int64)
        return self._run(arr, np.arange(len(ids), dtype=np.int64)[None, :])

    @property
    def can_rollback(self) -> bool:  # type: ignore[override]
        return self._paged is not None

    rollback_note = ("the stateful sdpa graph keeps its cache in state variables that only "
                     "grow; use attention=\"paged\"")

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        if self._paged is None:
            raise ChatlabError(f"{self.name} with attention=\"sdpa\" cannot feed several tokens "
                               "after its cache; use attention=\"paged\"")
        logits = self._paged.extend(ids, keep)
        self.length = self._paged.length
        return logits

    @property
    def verify_width(self) -> int | None:
        """Tokens every verify pass is padded to (a graph of its own), or None: not prepared."""
        return self._paged.verify_width if self._paged is not None and self._paged.verify else None

    def prepare_verify(self, width: int) -> None:
        """Compile the paged graph's verify graph for passes of `width` tokens (1 + the longest
        guess), so that no pass changes a graph's input shapes (chatlab.backends.paged)."""
        if self._paged is None:
            raise ChatlabError(f"{self.name} cannot verify guesses: {self.rollback_note}")
        self._paged.add_verify(width)

    def truncate(self, length: int) -> None:
        if self._paged is None:
            raise ChatlabError(f"{self.name} cannot roll back: {self.rollback_note}")
        self._paged.truncate(length)
        self.length = self._paged.length

    def snapshot(self) -> tuple[object, int]:
        if self._paged is None:
            raise ChatlabError(f"{self.name} cannot copy its cache out: {self.rollback_note}")
        return self._paged.snapshot()

    def restore(self, snap: object, length: int) -> None:
        # a snapshot came from snapshot(), which needs the paged graph: its arrays by name
        assert self._paged is not None and isinstance(snap, dict)
        self._paged.restore(snap, length)
        self.length = length

    def step(self, token_id: int) -> np.ndarray:
        if self._paged is not None:
            logits = self._paged.step(token_id)
            self.length = self._paged.length
            return logits
        self._ids[0, 0] = token_id
        self._pos[0, 0] = self.length
        return self._run(self._ids, self._pos)


def load(model_name: str, weight_format: str = "int8", precision: str = DEFAULT_PRECISION,
         threads: int | None = None, slice_logits: bool = True,
         kv_cache_precision: str | None = None, attention: str = DEFAULT_ATTENTION,
         dynamic_quantization: bool | None = None) -> OpenVINOBackend:
    from chatlab.backends.export import export_model

    precision = check_precision(precision)  # before a first-use export of half a minute
    folder = export_model(model_name, weight_format)
    name = f"openvino-{weight_format}"
    return OpenVINOBackend(folder, None, precision=precision, threads=threads,
                           slice_logits=slice_logits, name=name, model_name=model_name,
                           kv_cache_precision=kv_cache_precision, attention=attention,
                           dynamic_quantization=dynamic_quantization)
