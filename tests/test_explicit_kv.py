"""The stateless export driven by hand: its ports, its cache key, and the same greedy tokens as
chatlab's stateful loop at f32. Tests that load a model are marked slow one by one, so that
the cache-key test also runs in the fast leg."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from chatlab.backends import export, load_backend
from chatlab.errors import ChatlabError
from chatlab.generate import SamplingParams, generate
from chatlab.lab import explicit_kv

MODEL = "smollm2-135m-instruct"
QUESTIONS = ["What is the capital of France?", "Explain what a KV cache is in one sentence."]


@pytest.fixture(scope="module")
def kv() -> explicit_kv.ExplicitKV:
    return explicit_kv.load(MODEL, "int8")  # the notebook's; fp32 holds ~1.1 GB once compiled


@pytest.fixture(scope="module")
def stateful():
    return load_backend(MODEL, "openvino", "int8", precision="f32")  # same weights, same math


def prompt(tok, question: str) -> list[int]:
    from chatlab.render import resolve

    return resolve(tok, MODEL).render([{"role": "user", "content": question}]).ids


@pytest.mark.slow  # loads the exported model
def test_the_explicit_loop_equals_the_stateful_loop(kv, stateful):
    total = 0
    for q in QUESTIONS:
        ids = prompt(stateful.tokenizer, q)
        expect = list(generate(stateful, ids, SamplingParams(max_new_tokens=24)))[-1].token_ids
        got = kv.greedy(ids, 24)
        assert got == expect, q
        total += len(got)
    assert total >= 30  # real replies, not a token or two


@pytest.mark.slow  # loads the exported model
def test_every_layer_has_a_past_and_a_present(kv, smollm2_path: Path):
    layers = json.loads((smollm2_path / "config.json").read_text())["num_hidden_layers"]
    assert kv.layers == layers == 30
    ports = kv.ports()
    inputs = {p.name for p in ports if p.direction == "input"}
    outputs = {p.name for p in ports if p.direction == "output"}
    assert {"input_ids", "attention_mask", "position_ids"} <= inputs
    assert "logits" in outputs
    for n in range(layers):
        for kind in ("key", "value"):
            assert f"past_key_values.{n}.{kind}" in inputs
            assert f"present.{n}.{kind}" in outputs
    assert len(inputs) == 3 + 2 * layers + kv.has_beam_idx
    past0 = next(p for p in ports if p.name == "past_key_values.0.key")
    assert past0.shape.count("?") == 2  # batch and sequence are dynamic, heads and head_dim not
    # f32 on every CPU (an AMX CPU's export says bf16 until the load retypes it)
    assert {p.type for p in ports if p.name.startswith(("past_key_values", "present"))} == {"f32"}
    table = explicit_kv.io_table(ports)
    assert "past_key_values.0.key" in table and "present.0.value" in table
    assert "past_key_values.1.key" not in table and f"{4 * (layers - 1)} more" in table


@pytest.mark.slow  # loads the exported model
def test_the_cache_starts_empty_and_grows_one_position_per_step(kv, stateful):
    empty = kv.empty_cache()
    assert len(empty) == 2 * kv.layers and explicit_kv.cache_length(empty) == 0
    ids = prompt(stateful.tokenizer, QUESTIONS[0])
    logits, cache = kv.forward(ids, empty)
    assert explicit_kv.cache_length(cache) == len(ids)
    assert np.allclose(logits, stateful.prefill(ids), atol=1e-4)  # same scores as the stateful graph
    token = int(np.argmax(logits))
    logits2, cache2 = kv.forward([token], cache)
    assert explicit_kv.cache_length(cache2) == len(ids) + 1
    # Both caches are f32 (chatlab pins the stateful graph's KV_CACHE_PRECISION, which the CPU
    # plugin would keep in u8, where the scores differed by ~0.2-0.4): the same scores.
    ref = stateful.step(token)
    assert np.allclose(logits2, ref, atol=1e-3) and int(np.argmax(logits2)) == int(np.argmax(ref))
    # The cache is what the model remembers: dropping it changes the next scores entirely.
    forgotten, _ = kv.forward([token], empty)
    assert np.abs(forgotten - logits2).max() > 1.0


@pytest.mark.slow  # loads the exported model
def test_the_race_times_both_paths_over_the_same_tokens(kv, stateful):
    ids = prompt(stateful.tokenizer, QUESTIONS[0])
    cached, uncached, with_kv, without_kv = kv.race(ids, 6)
    assert cached == uncached == kv.greedy(ids, 6, stop_ids=[])
    for seconds in (with_kv, without_kv):  # cumulative: 0 before the first token, then growing
        assert len(seconds) == 7 and seconds[0] == 0.0
        assert all(b > a for a, b in zip(seconds, seconds[1:]))
    with pytest.raises(ChatlabError, match="prompt is empty"):
        kv.race([], 6)


def test_stateless_and_stateful_exports_have_different_cache_keys():
    a, b = export.export_dir(MODEL, "fp32"), export.export_dir(MODEL, "fp32", stateful=False)
    assert a != b and a.parent == b.parent
    assert export.lock_path(a) != export.lock_path(b)
    assert "--disable-stateful" in export.cli_args(Path("src"), "fp32", Path("out"), stateful=False)
    assert "--disable-stateful" not in export.cli_args(Path("src"), "fp32", Path("out"))


@pytest.mark.slow  # loads the exported model
def test_a_stateful_export_is_refused_by_name(stateful):
    with pytest.raises(ChatlabError, match="stateful export"):
        explicit_kv.ExplicitKV(export.export_dir(MODEL, "int8"))
    with pytest.raises(ChatlabError, match="stateless export has no past_key_values"):
        export.verify(export.export_dir(MODEL, "int8"), stateful=False)


@pytest.mark.slow  # loads the exported model
def test_an_empty_prompt_is_refused(kv):
    with pytest.raises(ChatlabError, match="prompt is empty"):
        kv.greedy([], 4)


def test_cache_ports_are_retyped_f32_whatever_the_exporting_cpu_chose() -> None:
    """optimum-intel wraps a stateless export's f32 graph in bf16 conversions at its cache ports
    on a CPU with bf16 (an AMX Xeon here); f32 loading undoes the wrapping, so the cache is never
    rounded to bf16 on the way in or out."""
    import openvino as ov
    import openvino.opset13 as ops

    past = ops.parameter([1, 3, -1, 64], ov.Type.bf16, name="past")
    past.output(0).set_names({"past_key_values.0.key"})
    ids = ops.parameter([1, -1], ov.Type.i64, name="ids")
    ids.output(0).set_names({"input_ids"})
    inner = ops.add(ops.convert(past, "f32"), ops.constant(np.float32(0.5)))  # the f32 graph
    wrapped = ops.convert(inner, "bf16")
    wrapped.output(0).set_names({"present.0.key"})
    model = ov.Model([ops.result(wrapped), ops.result(ids)], [past, ids], "tiny")
    fixed = explicit_kv.f32_cache_ports(model)
    types = {p.get_any_name(): p.get_element_type() for p in [*fixed.inputs, *fixed.outputs]}
    assert types == {"past_key_values.0.key": ov.Type.f32, "present.0.key": ov.Type.f32,
                     "input_ids": ov.Type.i64}
    # exact in f32: 1 + 2**-12 is not a bf16 number, and survives the round trip
    x = np.full((1, 3, 2, 64), 1 + 2**-12, dtype=np.float32)
    out = ov.Core().compile_model(fixed, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(
        {"past_key_values.0.key": x, "input_ids": np.zeros((1, 1), np.int64)})
    assert np.array_equal(out["present.0.key"], x + 0.5)
    assert explicit_kv.f32_cache_ports(fixed) is fixed
