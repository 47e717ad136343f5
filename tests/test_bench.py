"""`chatlab bench`: structure, ratios, targets and plot (speed itself is never asserted)."""
from __future__ import annotations

import json

import pytest

from chatlab.bench import BASELINE, ENGINES, BenchConfig, add_ratios, bench_prompts, format_table, save_plot
from chatlab.cli import main
from chatlab.errors import ChatlabError, UnknownNameError


def fake_result() -> dict:
    rows = []
    for i, name in enumerate(ENGINES):
        rows.append({"name": name, "decode_tok_s": 100.0 + 10 * i, "decode_tok_s_range": (90.0 + 10 * i, 110.0 + 10 * i),
                     "ttft_ms": 40.0 - i, "ttft_ms_range": (35.0 - i, 45.0 - i),
                     "ttft_long_ms": 300.0, "ttft_long_ms_range": (290.0, 310.0), "rss_mb": 500.0,
                     "precision": "f32", "threads": None if name.startswith("genai") else 2})
    result = {"model": "m", "rounds": 3, "new_tokens": 64, "prompt_tokens": {"short": 40, "long": 1010},
              "baseline": BASELINE, "precision": "f32", "engines": rows,
              "cpu": {"model": "Test CPU 9000", "flags": ["avx512f", "avx512_bf16"], "threads": 2}}
    add_ratios(result)
    return result


def test_ratios_and_targets_are_computed_against_the_baseline():
    result = fake_result()
    by = {r["name"]: r for r in result["engines"]}
    assert by[BASELINE]["decode_tok_s_ratio"] == 1.0
    ov8, genai = by["chatlab-openvino-int8"], by[BASELINE]
    assert ov8["decode_tok_s_ratio"] == pytest.approx(ov8["decode_tok_s"] / genai["decode_tok_s"])
    targets = {(t["engine"], t["metric"]): t for t in result["targets"]}
    decode = targets[("chatlab-openvino-int8", "decode_tok_s")]
    assert decode["ratio"] == pytest.approx(130 / 160, abs=1e-3) and decode["met"] is False
    ttft = targets[("chatlab-openvino-int8", "ttft_ms")]
    assert ttft["ratio"] == pytest.approx(37 / 34, abs=1e-3) and ttft["met"] is True  # 1.09 <= 1.1
    torch_t = targets[("chatlab-torch", "decode_tok_s")]
    assert torch_t["versus"] == "hf-generate" and torch_t["met"] is False  # 100 < 110


def test_table_and_plot(tmp_path):
    result = fake_result()
    table = format_table(result)
    assert all(name in table for name in ENGINES) and "NOT met" in table and "(1.00x)" in table
    assert "CPU: Test CPU 9000; flags: avx512f avx512_bf16 (bf16 native); 2 threads" in table
    assert "precision asked: f32" in table
    rows = {line.split()[0]: line.split()[1:3] for line in table.splitlines()[3:3 + len(ENGINES)]}
    assert rows["chatlab-torch"] == ["f32", "2"] and rows[BASELINE] == ["f32", "-"]
    png = save_plot(result, tmp_path / "b" / "bench.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_config_validation():
    assert BenchConfig.make("m", quick=True).rounds == 3
    assert BenchConfig.make("m").tokens == 128
    with pytest.raises(UnknownNameError, match="genai-int8, genai-int8-sdpa"):
        BenchConfig.make("m", engines=["vllm"])
    assert BenchConfig.make("m", engines=["genai-int8-sdpa"]).engines == ["genai-int8-sdpa"]
    with pytest.raises(ChatlabError, match="rounds"):
        BenchConfig.make("m", rounds=0)
    assert BenchConfig.make("m").precision == "f32"
    with pytest.raises(UnknownNameError, match="valid choices: f32, bf16"):
        BenchConfig.make("m", precision="int8")


def test_prompts_are_rendered_chat_turns():
    p = bench_prompts("smollm2-135m-instruct")
    assert p["short"][0] == 1 and p["short"][-3:] == p["long"][-3:]  # both end "<|im_start|>assistant\\n"
    assert 1000 <= len(p["long"]) < 1100 and len(p["short"]) < 100


def test_a_real_run_of_two_engines(capsys, tmp_path):
    """One short round of chatlab's OpenVINO int4 loop against genai, through the CLI; both at
    f32, as the engines report it (chatlab's from its compiled model)."""
    code = main(["bench", "--json", "--rounds", "1", "--tokens", "6",
                 "--engines", f"chatlab-openvino-int4,{BASELINE}", "--plot", str(tmp_path / "p.png")])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in result["engines"]}
    assert set(rows) == {"chatlab-openvino-int4", BASELINE}
    for r in rows.values():
        assert r["decode_tok_s"] > 0 and r["ttft_ms"] > 0 and r["ttft_long_ms"] > 0 and r["rss_mb"] > 100
        assert len(r["first_tokens"]) == 6
        assert r["precision"] == "f32"
    assert rows["chatlab-openvino-int4"]["threads"] >= 1
    assert result["precision"] == "f32" and result["cpu"]["model"] and result["cpu"]["threads"] >= 1
    assert rows[BASELINE]["decode_tok_s_ratio"] == 1.0
    assert (tmp_path / "p.png").is_file()
