"""OpenVINO backend: chatlab's own loop over the graph optimum-intel exports, paged (the default:
faster, and it rolls back) or stateful as exported (`attention="sdpa"`: its cache only grows)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from chatlab._thirdparty import Decoder, HFTokenizer, Jsonable, LoaderOption, OVCompiled
from chatlab.backends.export import export_model
from chatlab.backends.paged import PagedGraph, slice_last_position
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, compiled_facts, ov_config
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.models import load_tokenizer
from chatlab.models.cache import read_json


def eos_ids_from(folder: Path) -> list[int]:
    """generation_config's eos ids (int or list), else config's."""
    for fname in ("generation_config.json", "config.json"):
        eos = (read_json(folder / fname) or {}).get("eos_token_id")
        if eos is not None:
            return [eos] if isinstance(eos, int) else [int(e) for e in eos]
    return []


def context_length_of(config: dict[str, Jsonable]) -> int:
    """A model config's context window (ChatGLM's is `seq_length`)."""
    return int(config.get("max_position_embeddings") or config.get("seq_length") or 2048)


def cleans_up_spaces(folder: Path) -> bool:
    """transformers' decode post-processes spaces when this is set; raw `tokenizers` does not."""
    config = read_json(folder / "tokenizer_config.json")
    return config is None or bool(config.get("clean_up_tokenization_spaces", False))


ATTENTIONS = ["paged", "sdpa"]
DEFAULT_ATTENTION = "paged"


class ExportBackend:
    """What a backend over an export has: its facts and tokenizers (and a compiled graph's precision)."""

    compiled: OVCompiled
    vocab_size: int
    compute_notes: tuple[str, ...] = ()  # the load profile's notes (chatlab.backends.precision)

    def __init__(self, folder: Path, tokenizer: HFTokenizer, model_name: str | None, name: str) -> None:
        self.folder, self.model_name, self.name = folder, model_name, name
        self.context_length = context_length_of(json.loads((folder / "config.json").read_text()))
        self.eos_ids = eos_ids_from(folder)
        self._tokenizer: HFTokenizer = tokenizer
        self._decoder: Decoder = None

    def _read_facts(self, precision: str) -> None:
        facts = compiled_facts(self.compiled)
        self.precision, self.threads = facts["precision"], facts["threads"]
        if self.precision != precision:
            raise ChatlabError(f"OpenVINO compiled the model at {self.precision} although "
                               f"{precision} was asked for; use --precision {self.precision}")

    @property
    def tokenizer_loaded(self) -> bool:
        return self._tokenizer is not None

    @property
    def tokenizer(self) -> HFTokenizer:
        """The chat tokenizer, loaded on first use (generation does not need transformers)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.model_name or str(self.folder))
        return self._tokenizer

    @property
    def decoder(self) -> Decoder:
        """What the loop decodes with: `tokenizers` from tokenizer.json (no torch), else the tokenizer."""
        if self._decoder is None:
            path = self.folder / "tokenizer.json"
            if path.is_file() and not cleans_up_spaces(self.folder):
                from tokenizers import Tokenizer

                self._decoder = Tokenizer.from_file(str(path))
            else:
                self._decoder = self.tokenizer
        return self._decoder

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name} {self.precision} vocab={self.vocab_size} "
                f"ctx={self.context_length}>")


class StatefulBackend(ExportBackend):
    """The stateful graph as exported (attention="sdpa"): its cache cannot roll back."""

    attention = "sdpa"

    def __init__(self, folder: Path, config: dict[str, Jsonable], precision: str, tokenizer: HFTokenizer = None,
                 slice_logits: bool = True, name: str = "openvino", model_name: str | None = None) -> None:
        import openvino as ov

        super().__init__(folder, tokenizer, model_name, name)
        core = ov.Core()
        model = core.read_model(folder / "openvino_model.xml")
        self.sliced = slice_logits and slice_last_position(model)
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.vocab_size = int(model.output("logits").get_partial_shape()[2].get_length())
        self._mask = np.ones((1, self.context_length), dtype=np.int64)
        self._ids = np.zeros((1, 1), dtype=np.int64)
        self._pos = np.zeros((1, 1), dtype=np.int64)
        self._beam = np.zeros((1,), dtype=np.int32)
        self._logits = self.request.get_output_tensor  # bound method, looked up once
        self.length = 0
        self._read_facts(precision)

    def reset(self) -> None:
        self.request.reset_state()
        self.length = 0

    def _run(self, ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
        n = self.length + ids.shape[1]
        self.request.infer({"input_ids": ids, "attention_mask": self._mask[:, :n],
                            "position_ids": pos, "beam_idx": self._beam}, share_inputs=True)
        self.length = n
        return self._logits(0).data[0, -1]  # a view: valid until the next infer

    def prefill(self, ids: list[int]) -> np.ndarray:
        _check_prompt(ids, self.context_length)
        self.reset()
        arr = np.asarray([ids], dtype=np.int64)
        return self._run(arr, np.arange(len(ids), dtype=np.int64)[None, :])

    def step(self, token_id: int) -> np.ndarray:
        self._ids[0, 0] = token_id
        self._pos[0, 0] = self.length
        return self._run(self._ids, self._pos)


class PagedBackend(ExportBackend):
    """The graph rewritten for paged attention: its cache rolls back, copies out, verifies guesses."""

    attention = "paged"

    def __init__(self, graph: "PagedGraph", folder: Path, config: dict[str, Jsonable], precision: str,
                 tokenizer: HFTokenizer = None, name: str = "openvino", model_name: str | None = None) -> None:
        super().__init__(folder, tokenizer, model_name, name)
        self.graph = graph
        self.compiled, self.request, self.sliced = graph.compiled, graph.request, graph.sliced
        self.vocab_size = graph.vocab_size
        self._read_facts(precision)
        # whether a several-token pass agrees with one-token steps (dynamic quantization off)
        try:
            self.exact_extend = int(self.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) == 0
        except Exception:  # noqa: BLE001 - a plugin without the property quantizes nothing
            self.exact_extend = True

    @property
    def length(self) -> int:
        return self.graph.length

    def reset(self) -> None:
        self.graph.reset()

    def prefill(self, ids: list[int]) -> np.ndarray:
        _check_prompt(ids, self.context_length)
        self.reset()
        return self.extend(ids)[-1]

    def step(self, token_id: int) -> np.ndarray:
        return self.graph.step(token_id)

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        return self.graph.extend(ids, keep)

    @property
    def verify_width(self) -> int | None:
        return self.graph.verify_width if self.graph.verify else None

    def prepare_verify(self, width: int) -> None:
        """Compile the verify graph for passes of `width` tokens (1 + the longest guess)."""
        if not self.exact_extend:
            raise ChatlabError("speculative decoding on this OpenVINO backend would change greedy "
                               "output: its CPU plugin quantizes activations differently for a "
                               "several-token verify pass than for a one-token step; load it with "
                               "dynamic_quantization=False (chatlab's --speculate does so)")
        self.graph.add_verify(width)

    def truncate(self, length: int) -> None:
        self.graph.truncate(length)

    def snapshot(self) -> tuple[object, int]:
        return self.graph.snapshot()

    def restore(self, snap: object, length: int) -> None:
        assert isinstance(snap, dict)  # from snapshot(): the graph's arrays by name
        self.graph.restore(snap, length)


def _check_prompt(ids: list[int], context_length: int) -> None:
    if not ids:
        raise ValueError("prefill needs at least one token")
    if len(ids) >= context_length:
        raise ValueError(f"prompt of {len(ids)} tokens exceeds the context of {context_length}")


def open_backend(folder: Path, tokenizer: HFTokenizer = None, precision: str = DEFAULT_PRECISION,
                 threads: int | None = None, slice_logits: bool = True, name: str = "openvino",
                 model_name: str | None = None, kv_cache_precision: str | None = None,
                 attention: str = DEFAULT_ATTENTION,
                 dynamic_quantization: bool | None = None) -> PagedBackend | StatefulBackend:
    """The exported model in `folder` on the attention graph asked for (paged may fall back)."""
    precision = check_precision(precision)
    if attention not in ATTENTIONS:
        raise UnknownNameError("attention", attention, ATTENTIONS)
    # the precision is always passed: left unset, the CPU plugin picks bf16 on bf16 CPUs
    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
              **ov_config(precision, threads, kv_cache_precision, dynamic_quantization)}
    if attention == "paged":
        try:
            graph = PagedGraph(folder, config, slice_logits)
        except (ValueError, RuntimeError) as e:  # a graph OpenVINO cannot rewrite
            warnings.warn(f"paged attention is not available for {folder.name} ({e}); running "
                          "the stateful graph instead (attention=\"sdpa\")", stacklevel=2)
        else:
            return PagedBackend(graph, folder, config, precision, tokenizer, name, model_name)
    return StatefulBackend(folder, config, precision, tokenizer, slice_logits, name, model_name)


def load(model_name: str, weight_format: str = "int8", precision: str = DEFAULT_PRECISION,
         **options: LoaderOption) -> PagedBackend | StatefulBackend:
    """`model_name`'s export (made on first use) on open_backend's graph; `options`: its own."""
    precision = check_precision(precision)  # before a first-use export of half a minute
    return open_backend(export_model(model_name, weight_format), None, precision,
                        name=f"openvino-{weight_format}", model_name=model_name, **options)
