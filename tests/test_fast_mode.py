"""The fast profile: each setting it turns on, what an explicit value overrides, and what it
falls back from said in the backend's notes, never silently (loaders stubbed; one real load)."""
from __future__ import annotations

import pytest

from chatlab.backends import fast, openvino, torch
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


def test_fast_turns_on_what_the_cpu_offers(seen, monkeypatch):
    monkeypatch.setattr(fast, "cpu_has_bf16", lambda: True)
    loaded = load_backend("m", "openvino", fast=True)
    fmt, kw = seen["openvino"]
    assert fmt == "int4" and kw["precision"] == "bf16"
    assert kw["kv_cache_precision"] == "u8" and kw["dynamic_quantization"] is True
    assert "fast" not in kw and loaded.compute_notes == ("fast profile",)


def test_a_cpu_without_bf16_falls_back_to_f32_and_says_so(seen, monkeypatch):
    monkeypatch.setattr(fast, "cpu_has_bf16", lambda: False)
    loaded = load_backend("m", "openvino", fast=True)
    assert seen["openvino"][1]["precision"] == "f32"
    assert any("bf16 is not among the CPU plugin's OPTIMIZATION_CAPABILITIES" in n
               and "arithmetic stays f32" in n for n in loaded.compute_notes)


def test_explicit_choices_win_and_are_noted(seen, monkeypatch):
    monkeypatch.setattr(fast, "cpu_has_bf16", lambda: True)
    loaded = load_backend("m", "openvino", "int8", precision="f32", fast=True, dynamic_quantization=False)
    fmt, kw = seen["openvino"]
    assert fmt == "int8" and kw["precision"] == "f32" and kw["kv_cache_precision"] == "u8"
    assert kw["dynamic_quantization"] is False
    assert any("dynamic activation quantization off" in n for n in loaded.compute_notes)
    assert "int8 weights, not int4" in loaded.compute_notes


def test_torch_gets_bf16_only_and_says_what_it_lacks(seen, monkeypatch):
    monkeypatch.setattr(fast, "cpu_has_bf16", lambda: True)
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


def test_a_real_fast_load_reports_what_it_runs():
    from chatlab.backends.precision import cpu_has_bf16

    loaded = load_backend("smollm2-135m-instruct", "openvino", fast=True)
    line = fast.compute_line(loaded)
    assert line.startswith(f"openvino-int4 at {'bf16' if cpu_has_bf16() else 'f32'}, KV cache u8")
    assert "fast profile" in line
