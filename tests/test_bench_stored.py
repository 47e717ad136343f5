"""Stored bench results: labelled with their machine, loaded through chatlab's data folder, and
rendered with that label above the table."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from chatlab.lab.bench.report import add_ratios
from chatlab.cli import main
from chatlab.lab.bench.report import engines_table, label, load_stored, serving_table
from chatlab.errors import ChatlabError

CPU = {"model": "Some CPU", "flags": ["avx512f", "avx512_bf16"], "threads": 2}


def bench_result() -> dict[str, Any]:
    def row(name: str, decode: float, ttft: float) -> dict[str, Any]:
        return {"name": name, "decode_tok_s": decode, "decode_tok_s_range": [decode - 1, decode + 1],
                "ttft_ms": ttft, "ttft_ms_range": [ttft - 5, ttft + 5], "ttft_long_ms": 10 * ttft,
                "ttft_long_ms_range": [9 * ttft, 11 * ttft], "rss_mb": 600.0, "load_s": 1.0,
                "precision": "f32", "threads": 2, "first_tokens": [1, 2]}

    result = {"model": "smollm2-135m-instruct", "rounds": 5, "new_tokens": 128,
              "prompt_tokens": {"short": 42, "long": 1029}, "baseline": "genai-int8",
              "precision": "f32", "cpu": CPU,
              "engines": [row("chatlab-openvino-int8", 120.0, 110.0), row("genai-int8", 100.0, 100.0)]}
    add_ratios(result)
    return result


def serve_result() -> dict[str, Any]:
    return {"backend": "genai", "weight_format": "int8", "precision": "f32", "clients": 8,
            "tokens": 96, "rounds": 2, "one_client_tok_s": 100.0, "n_clients_tok_s": 650.0,
            "ttft_p50_s": 0.25, "ttft_p95_s": 0.61, "ratio": 6.5,
            "greedy_equality": {"prompts": 4, "identical": 4, "first_difference": [None] * 4}}


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    (folder / "bench").mkdir(parents=True)
    monkeypatch.setenv("CHATLAB_DATA", str(folder))
    return folder


def test_the_cli_stores_a_labelled_result_that_loads_and_renders(data: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(bench_result())))
    assert main(["bench", "store", "full.json", "--command", "chatlab bench --json",
                 "--machine", "a quiet 2-core VM"]) == 0
    assert capsys.readouterr().out == "stored data/bench/full.json\n"
    result = load_stored("full.json")
    assert result["run"]["command"] == "chatlab bench --json" and result["run"]["cpu"] == CPU
    text = engines_table(result)
    first, second = text.splitlines()[:2]
    assert first.startswith("stored result of `chatlab bench --json` on 20")
    assert "a quiet 2-core VM" in second and "Some CPU (avx512f avx512_bf16), 2 threads" in second
    assert "chatlab-openvino-int8" in text and "(1.20x)" in text  # the bench's own table below


def test_the_cli_refuses_stdin_that_is_not_json(data: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("plot: bench.png"))
    assert main(["bench", "store", "x.json", "--command", "chatlab bench", "--machine", "a VM"]) == 2
    assert "chatlab bench store: error: stdin is not the JSON of a bench run" in capsys.readouterr().err
    assert not (data / "bench" / "x.json").exists()


def test_a_result_without_its_machine_is_refused(data: Path) -> None:
    (data / "bench" / "bare.json").write_text(json.dumps(bench_result()))
    with pytest.raises(ChatlabError, match="date, command, machine.*--machine"):
        load_stored("bare.json")
    (data / "bench" / "broken.json").write_text("{")
    with pytest.raises(ChatlabError, match="not valid JSON"):
        load_stored("broken.json")
    with pytest.raises(ChatlabError, match="--command and --machine"):
        label(bench_result(), command="chatlab bench", machine=" ")
    with pytest.raises(ChatlabError, match="missing.json"):
        load_stored("missing.json")


def test_serving_table_shows_the_ratio_and_ttft_percentiles() -> None:
    text = serving_table(label(serve_result(), "chatlab bench serving --clients 8 --json",
                               "a shared VM", date="2026-01-02"))
    assert "on 2026-01-02" in text and "machine: a shared VM" in text
    assert "ratio 6.50x; TTFT at 8 clients: p50 250 ms, p95 610 ms" in text
    assert "       8            650.0" in text and "4/4" in text
    assert "pipeline alone" not in text  # an older result without the engine-only rounds
    both = {**serve_result(), "engine_one_tok_s": 110.0, "engine_n_tok_s": 770.0, "engine_ratio": 7.0}
    text = serving_table(label(both, "chatlab bench serving --clients 8 --json", "a VM"))
    assert "the pipeline alone (no server, same prompts): ratio 7.00x (110.0 -> 770.0 tok/s)" in text
    assert "server 6.50x, engine alone 7.00x (its batching ceiling) on " in text  # the run's CPU
    assert "threads; the server keeps 93% of it, at least the 90% it should keep" in text
    short = {**both, "engine_ratio": 8.0, "cpu": {"model": "Test CPU", "threads": 2}}
    text = serving_table(label(short, "chatlab bench serving --clients 8 --json", "a VM"))
    assert "(its batching ceiling) on Test CPU, 2 threads; the server keeps 81% of it, less than " \
           "the 90% it should keep (9 points short)" in text


def test_the_shipped_stored_results_load() -> None:
    """data/bench/ as committed: each file is labelled and renders."""
    from chatlab.data import data_path

    files = sorted(p.name for p in data_path("bench").glob("*.json"))
    assert "full-run.json" in files and "serve-8-clients.json" in files
    assert "chatlab-openvino-int8" in engines_table(load_stored("full-run.json"))
    served = serving_table(load_stored("serve-8-clients.json"))
    assert "TTFT at 8 clients" in served
    assert "on Intel(R) Xeon(R) Processor, 2 threads; the server keeps 98% of it, at least the 90%" in served
