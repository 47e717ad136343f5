"""`chatlab bench`: structure, ratios, targets and plot (speed itself is never asserted)."""
from __future__ import annotations

import json

import pytest

from chatlab.lab.bench import BASELINE, ENGINES, BenchConfig, add_ratios, bench_prompts, format_table, runner, save_plot
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
    assert ttft["ratio"] == pytest.approx(37 / 34, abs=1e-3) and ttft["met"] is False  # 1.09 > 1.0
    torch_t = targets[("chatlab-torch", "decode_tok_s")]
    assert torch_t["versus"] == "hf-generate" and torch_t["met"] is False  # 100 < 110


def test_the_cpu_line_takes_bf16_from_the_record_and_old_records_from_their_flags():
    """A record says bf16 itself (OpenVINO's capability list, which can know bf16 where the
    reported x86 flags do not, as on ARM); a stored result from before that field has its flags."""
    from chatlab.lab.bench.report import cpu_line

    arm = {"model": "Neoverse-V1", "flags": [], "threads": 2, "bf16": True}
    assert cpu_line(arm) == "CPU: Neoverse-V1; flags: none of note (bf16 native); 2 threads available"
    assert "(no bf16)" in cpu_line({**arm, "bf16": False, "flags": ["avx512_bf16"]})
    assert "(bf16 native)" in cpu_line({"model": "Old", "flags": ["amx_bf16"], "threads": 2})
    assert "(no bf16)" in cpu_line({"model": "Old", "flags": ["avx512f"], "threads": 2})


def test_table_and_plot(tmp_path):
    result = fake_result()
    table = format_table(result)
    assert all(name in table for name in ENGINES) and "NOT met" in table and "(1.00x)" in table
    lesson = format_table(result, targets=False)   # what the notebooks print
    assert "target " not in lesson and "NOT met" not in lesson
    assert lesson.splitlines() == [line for line in table.splitlines() if not line.startswith("target ")]
    assert "CPU: Test CPU 9000; flags: avx512f avx512_bf16 (bf16 native); 2 threads" in table
    assert "precision asked: f32" in table
    rows = {line.split()[0]: line.split()[1:3] for line in table.splitlines()[3:3 + len(ENGINES)]}
    assert len(rows) == len(ENGINES)
    assert rows["chatlab-torch"] == ["f32", "2"] and rows[BASELINE] == ["f32", "-"]
    png = save_plot(result, tmp_path / "b" / "bench.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    # a name longer than the usual column (an extra engine) widens it instead of shifting its row
    result["engines"].append({**result["engines"][0], "name": "chatlab-openvino-int8-sdpa"})
    lines = format_table(result).splitlines()[2:3 + len(result["engines"])]
    assert len({len(line) for line in lines}) == 1, lines


def test_config_validation():
    assert BenchConfig.make("m", quick=True).rounds == 3
    assert BenchConfig.make("m").tokens == 128
    with pytest.raises(UnknownNameError, match="llama.cpp-q4_1, chatlab-openvino-int8-sdpa, genai-int8-sdpa"):
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


def test_prompts_rendered_in_a_child_keep_torch_out_of_the_parent():
    """run_benchmark's parent (a notebook's kernel) gets the same ids without importing torch."""
    import subprocess
    import sys

    code = ("import json, sys; from chatlab.lab.bench.runner import prompts_in_child; "
            "p = prompts_in_child('smollm2-135m-instruct'); print(json.dumps([p, 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    prompts, torch_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert not torch_loaded and prompts == bench_prompts("smollm2-135m-instruct")
    with pytest.raises(ChatlabError, match="no-such-model"):
        runner.prompts_in_child("no-such-model")


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


# --- scheduling: at most two engines in memory, side by side in pairs -----------------------

class FakeWorker:
    """Stands in for a worker process: counts how many are alive, and answers with timings
    that depend on the engine (so ratios are known) and on a global clock (so a slow stretch
    of the "machine" hits whoever runs then)."""

    alive_now = 0
    peak = 0
    log: list[str] = []

    def __init__(self, engine: str, model: str, precision: str) -> None:
        self.engine, self.load_s, self.precision, self.threads = engine, 0.1, precision, 2
        self.compute = "q4_1 weights" if engine.startswith("llama") else None
        self.open = True
        FakeWorker.alive_now += 1
        FakeWorker.peak = max(FakeWorker.peak, FakeWorker.alive_now)

    def alive(self) -> bool:
        return self.open

    def ask(self, request: dict) -> dict:
        FakeWorker.log.append(self.engine)
        speed = {BASELINE: 100.0}.get(self.engine, 120.0)
        n = request["tokens"]
        return {"ttft_s": 10 / speed, "decode_tok_s": speed, "tokens": list(range(n))}

    def close(self) -> float:
        self.kill()
        return 300.0

    def kill(self) -> None:
        if self.open:
            self.open = False
            FakeWorker.alive_now -= 1


def test_engines_run_in_pairs_with_the_baseline(monkeypatch):
    from chatlab.lab.bench import plan_groups, run_benchmark

    engines = ["chatlab-torch", "chatlab-openvino-int8", BASELINE, "optimum-int8"]
    assert plan_groups(engines) == [[BASELINE, "chatlab-torch"], [BASELINE, "chatlab-openvino-int8"],
                                    [BASELINE, "optimum-int8"]]
    assert plan_groups(["a", "b", "c"], baseline="z") == [["a", "b"], ["a", "c"]]  # no baseline
    assert plan_groups(["a"]) == [["a"]]
    FakeWorker.peak, FakeWorker.alive_now, FakeWorker.log = 0, 0, []
    config = BenchConfig.make("smollm2-135m-instruct", rounds=3, tokens=4, engines=engines)
    result = run_benchmark(config, progress=False, make_worker=FakeWorker)
    assert FakeWorker.peak == 2 and result["max_workers_alive"] == 2 and FakeWorker.alive_now == 0
    by = {r["name"]: r for r in result["engines"]}
    assert set(by) == set(engines)
    assert by["chatlab-torch"]["decode_tok_s_ratio"] == pytest.approx(1.2)
    assert by["optimum-int8"]["ttft_ms_ratio"] == pytest.approx(100 / 120)
    assert by[BASELINE]["decode_tok_s_ratio"] == 1.0
    # Per pair and engine: a warm-up of each prompt, then a short and a long prompt per round;
    # the baseline is in all three pairs. Rounds rotate who goes first.
    assert FakeWorker.log.count(BASELINE) == 3 * (2 + 3 * 2)
    assert FakeWorker.log.count("chatlab-torch") == 2 + 3 * 2
    b, t = BASELINE, "chatlab-torch"
    assert FakeWorker.log[:16] == [b, b, t, t, b, b, t, t, t, t, b, b, b, b, t, t]
    assert "at most 2 engines in memory" in format_table(result)


def test_a_missing_optional_engine_is_skipped_with_its_reason(monkeypatch, capsys):
    """llama.cpp without llama-cpp-python: a skip line naming the install command, no crash.
    sys.modules[...] = None makes the package look absent even where it is installed."""
    import sys

    from chatlab.lab.bench import run_benchmark
    from chatlab.lab.bench.engines import LLAMA_CPP, unavailable

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    assert "pip install -e '.[llamacpp]'" in unavailable(LLAMA_CPP, "f32")
    FakeWorker.peak, FakeWorker.alive_now, FakeWorker.log = 0, 0, []
    config = BenchConfig.make("smollm2-135m-instruct", rounds=1, tokens=4,
                              engines=[BASELINE, LLAMA_CPP])
    result = run_benchmark(config, progress=False, make_worker=FakeWorker)
    assert [r["name"] for r in result["engines"]] == [BASELINE]
    assert LLAMA_CPP not in FakeWorker.log
    assert result["skipped"][0]["name"] == LLAMA_CPP
    table = format_table(result)
    assert f"skipped {LLAMA_CPP}: llama-cpp-python is not installed" in table
    with pytest.raises(ChatlabError, match="no benchmark engine can run here"):
        run_benchmark(BenchConfig.make("m", engines=[LLAMA_CPP]), progress=False,
                      make_worker=FakeWorker)


def test_llama_cpp_refuses_bf16_with_a_reason(monkeypatch):
    from chatlab.lab.bench import llamacpp

    monkeypatch.setattr(llamacpp, "installed", lambda: True)
    assert "no bf16 compute" in llamacpp.unavailable("bf16")
    assert llamacpp.unavailable("f32") is None  # the shipped GGUF is there


def test_llama_cpp_engine_row_when_installed(capsys):
    """With llama-cpp-python installed (`pip install -e '.[llamacpp]'`) the engine gives the
    same kind of row as the others, paired with the baseline; its absence is tested above."""
    pytest.importorskip("llama_cpp", reason="optional extra: pip install -e '.[llamacpp]'")
    from chatlab.lab.bench.engines import LLAMA_CPP

    code = main(["bench", "--json", "--rounds", "1", "--tokens", "6", "--plot", "",
                 "--engines", f"{BASELINE},{LLAMA_CPP}"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in result["engines"]}
    assert set(rows) == {BASELINE, LLAMA_CPP} and result["skipped"] == []
    row = rows[LLAMA_CPP]
    assert row["decode_tok_s"] > 0 and row["ttft_long_ms"] > 0 and len(row["first_tokens"]) == 6
    assert row["precision"] == "f32" and "q4_1 weights" in row["compute"] and row["threads"] >= 1
    assert row["decode_tok_s_ratio"] > 0 and result["max_workers_alive"] == 2


@pytest.mark.slow
def test_genai_engine_prefills_a_repeated_prompt_again():
    """The genai rows are timed without prefix caching (chatlab's loop has none): a prompt seen
    in the previous run is prefilled again. With LLMPipeline's own default the repeat came back
    ~50x faster (20-50 ms against ~2.2 s here), so a bound of 0.3x a fresh prompt's time tells
    the two apart on a noisy machine."""
    from chatlab.lab.bench.engines import GenAI

    engine = GenAI("smollm2-135m-instruct")
    engine.load()
    long = bench_prompts("smollm2-135m-instruct")["long"]
    engine.run(long, 2)
    repeated = engine.run(long, 2).ttft_s
    fresh = engine.run([long[0], 1000] + long[1:], 2).ttft_s  # a new second token: nothing shared
    assert repeated > 0.3 * fresh, (repeated, fresh)


@pytest.mark.slow
def test_the_sdpa_engines_run_the_stateful_graph():
    """`chatlab-openvino-int8` is the loop on the paged-attention graph (the default);
    `-sdpa` is the same loop on the graph as exported, so the table shows what the rewrite buys."""
    from chatlab.lab.bench.engines import make_engine

    paged, sdpa = make_engine("chatlab-openvino-int8", "smollm2-135m-instruct"), make_engine(
        "chatlab-openvino-int8-sdpa", "smollm2-135m-instruct")
    for engine in (paged, sdpa):
        engine.load()
    assert paged.backend.attention == "paged" and sdpa.backend.attention == "sdpa"
    ids = bench_prompts("smollm2-135m-instruct")["short"]
    assert paged.run(ids, 8).tokens == sdpa.run(ids, 8).tokens
