"""The fast profile: each setting it turns on, what an explicit value overrides, and what it
falls back from said in the backend's notes, never silently (loaders stubbed; real loads on a
faked CPU without bf16, a faked one with it, and the CPU at hand)."""
from __future__ import annotations

import pytest

from chatlab.backends import openvino, precision, torch
from chatlab.backends.registry import check_choice, load_backend
from chatlab.cli import build_parser


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict:
    calls: dict = {}

    class Loaded:
        compute_notes: tuple[str, ...] = ()

    def fake_openvino(model: str, fmt: str, **kw: object) -> Loaded:
        calls["openvino"] = (fmt, kw)
        return Loaded()

    def fake_torch(model: str, **kw: object) -> Loaded:
        calls["torch"] = kw
        return Loaded()

    monkeypatch.setattr(openvino, "load", fake_openvino)
    monkeypatch.setattr(torch, "load", fake_torch)
    return calls


def test_fast_turns_on_what_the_cpu_offers(seen, fake_cpu):
    fake_cpu(bf16=True)
    loaded = load_backend("m", "openvino", fast=True)
    fmt, kw = seen["openvino"]
    assert fmt == "int4" and kw["precision"] == "bf16"
    assert kw["kv_cache_precision"] == "u8" and kw["dynamic_quantization"] is True
    assert "fast" not in kw and loaded.compute_notes == ("fast profile",)


def test_a_cpu_without_bf16_falls_back_to_f32_and_says_so(seen, fake_cpu):
    fake_cpu(bf16=False)
    loaded = load_backend("m", "openvino", fast=True)
    assert seen["openvino"][1]["precision"] == "f32"
    assert any("bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES" in n
               and "arithmetic stays f32" in n for n in loaded.compute_notes)


def test_explicit_choices_win_and_are_noted(seen, fake_cpu):
    fake_cpu(bf16=True)
    loaded = load_backend("m", "openvino", "int8", precision="f32", fast=True, dynamic_quantization=False)
    fmt, kw = seen["openvino"]
    assert fmt == "int8" and kw["precision"] == "f32" and kw["kv_cache_precision"] == "u8"
    assert kw["dynamic_quantization"] is False
    assert any("dynamic activation quantization off" in n for n in loaded.compute_notes)
    assert "int8 weights, not int4" in loaded.compute_notes


def test_torch_gets_bf16_only_and_says_what_it_lacks(seen, fake_cpu):
    fake_cpu(bf16=True)
    loaded = load_backend("m", "torch", fast=True)
    assert seen["torch"]["precision"] == "bf16" and "kv_cache_precision" not in seen["torch"]
    assert "the torch backend has no u8 KV cache or dynamic quantization" in loaded.compute_notes
    assert "fp32 weights, not int4" in loaded.compute_notes


def test_without_fast_nothing_changes(seen):
    loaded = load_backend("m", "openvino")
    assert seen["openvino"] == ("int8", {"precision": "f32"}) and loaded.compute_notes == ()
    assert check_choice("openvino", None, {"fast": True})[1] == "int4"
    assert check_choice("genai", None, {"fast": True})[1] == "int4"
    assert check_choice("torch", None, {"fast": True})[1] == "fp32"


def test_the_flag_reaches_every_command():
    parser = build_parser()
    assert parser.parse_args(["complete", "--messages", "m.json", "--fast"]).fast is True
    assert parser.parse_args(["serve", "--fast"]).fast is True
    assert parser.parse_args(["bench", "--fast"]).fast is True


F32_NOTE = "bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES on {}, so the arithmetic stays f32"


@pytest.mark.real_cpu
def test_a_real_fast_load_runs_what_the_cpu_at_hand_offers():
    """Nothing faked: the compiled model runs at bf16 where the CPU computes it natively, else at
    f32 with the note naming this CPU (on a bf16 CPU and on an AVX2-only one alike)."""
    here = precision.cpu()
    loaded = load_backend("smollm2-135m-instruct", "openvino", fast=True)
    line = precision.compute_line(loaded)
    want = "bf16" if here.bf16 else "f32"
    assert precision.compiled_facts(loaded.compiled)["precision"] == want
    assert line.startswith(f"openvino-int4 at {want}, KV cache u8, dynamic activation quantization group ")
    assert "fast profile" in line
    assert (F32_NOTE.format(here.model) in line) is not here.bf16


def test_without_bf16_the_whole_fast_path_falls_back_to_f32(fake_cpu):
    """A CPU without bf16, faked in the one place: fast_choices picks f32, check_precision lets
    it through, and the real OpenVINO load compiles at f32 and says why (on a bf16 CPU too)."""
    here = fake_cpu(bf16=False)
    loaded = load_backend("smollm2-135m-instruct", "openvino", fast=True)
    assert loaded.precision == "f32"
    assert precision.compiled_facts(loaded.compiled)["precision"] == "f32"
    assert F32_NOTE.format(here.model) in loaded.compute_notes
    assert precision.compute_line(loaded).startswith("openvino-int4 at f32, KV cache u8")


def test_with_bf16_the_whole_fast_path_asks_for_bf16(fake_cpu, monkeypatch):
    """A bf16 CPU, faked in the one place: through fast_choices and check_precision the fast
    profile asks OpenVINO's loader for bf16 and notes no fallback; the real PyTorch load keeps
    bf16 weights. OpenVINO is not loaded for real: on a CPU without bf16 its plugin may compile
    f32 at a bf16 hint, and this test is about what chatlab chose and asked for."""
    import torch as pytorch

    fake_cpu(bf16=True)
    asked: dict = {}

    class Loaded:
        compute_notes: tuple[str, ...] = ()

    def record(model: str, fmt: str, **kw: object) -> Loaded:
        asked.update(kw, fmt=fmt)
        return Loaded()

    monkeypatch.setattr(openvino, "load", record)
    loaded = load_backend("smollm2-135m-instruct", "openvino", fast=True)
    assert asked == {"fmt": "int4", "precision": "bf16", "kv_cache_precision": "u8", "dynamic_quantization": True}
    assert loaded.compute_notes == ("fast profile",)
    torch_loaded = load_backend("smollm2-135m-instruct", "torch", fast=True)
    assert torch_loaded.precision == "bf16"
    assert {p.dtype for p in torch_loaded.model.parameters()} == {pytorch.bfloat16}
    assert not any("arithmetic stays f32" in n for n in torch_loaded.compute_notes)
