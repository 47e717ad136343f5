"""The KV cache driven by hand, as the OpenVINO ChatGLM2 article does: the stateless export's cache
(`past_key_values.N.*` in, `present.N.*` out) fed back by the caller, to teach and to check both agree."""
from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chatlab._thirdparty import OVModel
from chatlab.backends.export import export_dir, export_model, is_exported
from chatlab.backends.openvino import eos_ids_from
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, ov_config
from chatlab.errors import ChatlabError

PAST, PRESENT = "past_key_values.", "present."
Cache = dict[str, np.ndarray]  # past_key_values.N.key/value -> [1, kv_heads, seq, head_dim]


@dataclass(frozen=True)
class Port:
    """One input or output of the graph: its name, element type and shape (`?` = dynamic)."""

    direction: str  # "input" or "output"
    name: str
    type: str
    shape: str


def f32_cache_ports(model: OVModel) -> OVModel:
    """The graph with its cache ports carried in f32: optimum-intel wraps the f32 graph in Converts
    to the exporting CPU's precision (bf16 with AMX), and the wrapping is undone here."""
    import openvino as ov

    f32, changed = ov.Type.f32, False
    for param in model.get_parameters():
        names = param.output(0).get_names()
        if any(n.startswith(PAST) for n in names) and param.get_element_type() != f32:
            param.set_element_type(f32)
            changed = True
    for result in model.get_results():
        names = result.output(0).get_names()
        source = result.input_value(0).get_node()
        if (any(n.startswith("present") for n in names) and source.get_type_name() == "Convert"
                and source.input_value(0).get_element_type() == f32
                and source.get_output_element_type(0) != f32):
            value = source.input_value(0)
            result.input(0).replace_source_output(value)
            value.get_tensor().add_names(names)  # the port keeps its name
            changed = True
    if changed:
        model.validate_nodes_and_infer_types()
    return model


class ExplicitKV:
    """A compiled stateless graph plus the few lines that carry its cache from step to step."""

    compute_notes: tuple[str, ...] = ()  # the load profile's notes (chatlab.backends.precision)

    def __init__(self, folder: Path, precision: str = DEFAULT_PRECISION, threads: int | None = None) -> None:
        import openvino as ov

        core = ov.Core()
        self.model = core.read_model(Path(folder) / "openvino_model.xml")
        inputs = {p.get_any_name() for p in self.model.inputs}
        if self.model.get_variables() or not any(n.startswith(PAST) for n in inputs):
            raise ChatlabError(f"{Path(folder).name} is a stateful export (its KV cache is hidden "
                               "state); load the stateless one with explicit_kv.load(model)")
        self.past_names = sorted((n for n in inputs if n.startswith(PAST)), key=_layer_order)
        self.layers = len(self.past_names) // 2
        self.has_beam_idx = "beam_idx" in inputs  # optimum adds it to stateful graphs only
        precision = check_precision(precision)
        if precision == "f32":
            self.model = f32_cache_ports(self.model)
        # f32 by default, as chatlab's stateful loop: the two graphs then agree token for token.
        self.compiled = core.compile_model(self.model, "CPU", ov_config(precision, threads))
        self.request = self.compiled.create_infer_request()
        self.eos_ids = eos_ids_from(Path(folder))

    def ports(self) -> list[Port]:
        """The graph's inputs then outputs, in graph order, as the article prints them."""
        return [Port(direction, p.get_any_name(), p.get_element_type().get_type_name(),
                     str(p.get_partial_shape()))
                for direction, group in (("input", self.model.inputs), ("output", self.model.outputs))
                for p in group]

    def empty_cache(self) -> Cache:
        """A past of length 0: each `past_key_values.*` with its sequence axis (2) of size 0."""
        cache = {}
        for name in self.past_names:
            shape = self.model.input(name).get_partial_shape()
            heads, head_dim = shape[1].get_length(), shape[3].get_length()  # static in the graph
            cache[name] = np.zeros((1, heads, 0, head_dim), dtype=np.float32)
        return cache

    def forward(self, ids: list[int], past: Cache) -> tuple[np.ndarray, Cache]:
        """Run `ids` after `past`; return the last position's logits and the grown cache."""
        seen = cache_length(past)
        n = seen + len(ids)
        inputs: dict[str, np.ndarray] = {
            "input_ids": np.asarray([ids], dtype=np.int64),
            "attention_mask": np.ones((1, n), dtype=np.int64),  # attend to every past and new token
            "position_ids": np.arange(seen, n, dtype=np.int64)[None, :],  # positions continue
            **past,
        }
        if self.has_beam_idx:
            inputs["beam_idx"] = np.zeros((1,), dtype=np.int32)
        out = self.request.infer(inputs)  # copies: they are passed back in as inputs
        present = {name: out[PRESENT + name[len(PAST):]] for name in self.past_names}
        return out["logits"][0, -1], present

    def greedy(self, ids: list[int], max_new_tokens: int, stop_ids: list[int] | None = None) -> list[int]:
        """Prefill with an empty past, then feed `present` back as `past` one token at a time."""
        if not ids:
            raise ChatlabError("the prompt is empty; pass at least one token id")
        stops = set(self.eos_ids if stop_ids is None else stop_ids)
        logits, cache = self.forward(list(ids), self.empty_cache())
        tokens: list[int] = []
        for _ in range(max_new_tokens):
            token = int(np.argmax(logits))
            tokens.append(token)
            if token in stops or len(tokens) == max_new_tokens:
                break
            logits, cache = self.forward([token], cache)
        return tokens

    def race(self, ids: list[int],
             max_new_tokens: int) -> tuple[list[int], list[int], list[float], list[float]]:
        """Greedy decoding with the cache fed back and without one, a step of each in turn so both
        see the same machine: both paths' tokens and cumulative seconds after 0, 1, ... tokens."""
        if not ids:
            raise ChatlabError("the prompt is empty; pass at least one token id")
        cached: list[int] = []
        uncached: list[int] = []
        past, with_kv, without_kv = self.empty_cache(), [0.0], [0.0]
        for n in range(max_new_tokens):
            start = time.perf_counter()
            logits, past = self.forward(cached[-1:] if n else list(ids), past)
            with_kv.append(with_kv[-1] + time.perf_counter() - start)
            cached.append(int(np.argmax(logits)))
            start = time.perf_counter()
            logits, _ = self.forward(list(ids) + uncached, self.empty_cache())
            without_kv.append(without_kv[-1] + time.perf_counter() - start)
            uncached.append(int(np.argmax(logits)))
        return cached, uncached, with_kv, without_kv


def cache_length(cache: Cache) -> int:
    """How many positions the cache holds (the sequence axis of any of its arrays)."""
    return next(iter(cache.values())).shape[2] if cache else 0


def _layer_order(name: str) -> tuple[int, str]:
    """past_key_values.10.key sorts after .9. (numerically), key before value."""
    _, layer, kind = name.split(".")
    return int(layer), kind


def io_table(ports: list[Port], first_layers: int = 1) -> str:
    """The ports as a printable table, the cache ports of the first `first_layers` layers only."""
    rows, hidden = [], 0
    for p in ports:
        parts = p.name.split(".")
        if p.name.startswith((PAST, PRESENT)) and int(parts[-2]) >= first_layers:
            hidden += 1
            continue
        rows.append(f"{p.direction:<7} {p.name:<26} {p.type:<4} {p.shape}")
    if hidden:
        rows.append(f"... and {hidden} more past_key_values.N / present.N ports of the other layers")
    return "\n".join(rows)


def load(model: str, weight_format: str = "int8", precision: str = DEFAULT_PRECISION,
         threads: int | None = None) -> ExplicitKV:
    """The stateless export of `model`, exported once (said in one line, not the exporter's), then cached."""
    precision = check_precision(precision)  # before a first-use export of minutes
    if is_exported(export_dir(model, weight_format, stateful=False)):
        return ExplicitKV(export_model(model, weight_format, stateful=False), precision, threads)
    print(f"exporting {Path(model).name} {weight_format} without state (once; a few minutes on 2 cores) ...")
    with contextlib.redirect_stderr(io.StringIO()):
        folder = export_model(model, weight_format, stateful=False)
    return ExplicitKV(folder, precision, threads)
