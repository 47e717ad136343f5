"""One registry of names: the bench's engines are rows of chatlab.lab.bench.engines (each a
REGISTRY backend with that backend's options, or a named reference runtime), and the bench,
the CLI and the server resolve every name through it and through REGISTRY. No model loads."""
from __future__ import annotations

from typing import Any

import pytest

from chatlab.backends.registry import REGISTRY
from chatlab.lab.bench import engines as bench_engines
from chatlab.lab.bench.engines import ENGINE_ROWS, REFERENCES, EngineRow, engine_names, get_engine
from chatlab.cli.bench import engine_table
from chatlab.lab.bench.runner import BenchConfig
from chatlab.cli import build_parser, main
from chatlab.errors import ChatlabError, UnknownNameError


def test_the_bench_lists_the_registry_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--engines", "list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(ENGINE_ROWS)
    assert bench_engines.ENGINES == engine_names("default") and "genai-int8" in bench_engines.ENGINES
    assert bench_engines.ENGINES + bench_engines.EXTRA_ENGINES == list(ENGINE_ROWS)
    assert bench_engines.SPECULATIVE_ENGINES == [n for n, r in ENGINE_ROWS.items() if r.group == "speculative"]


def test_every_row_runs_a_registry_backend_or_a_reference_with_a_loader() -> None:
    for row in ENGINE_ROWS.values():
        assert row.runtime in REGISTRY or row.runtime in REFERENCES, row
        assert row.runtime in bench_engines.LOADERS, row
    assert set(bench_engines.LOADERS) == {r.runtime for r in ENGINE_ROWS.values()}


def test_a_row_is_built_from_its_registry_settings() -> None:
    sdpa = bench_engines.make_engine("chatlab-openvino-int8-sdpa", "m")
    assert isinstance(sdpa, bench_engines.ChatlabLoop)
    assert sdpa.args == ("m", "openvino", "int8") and sdpa.attention == "sdpa"
    pl = bench_engines.make_engine("chatlab-openvino-int4-pl", "m", speculate={"draft_tokens": 6, "ngram": 2})
    assert isinstance(pl, bench_engines.ChatlabLoop) and pl.args[2] == "int4"
    assert pl.speculate is not None and (pl.speculate.draft_tokens, pl.speculate.ngram) == (6, 2)
    genai = bench_engines.make_engine("genai-int4", "m", speculate={"draft_tokens": 6, "ngram": 2})
    assert isinstance(genai, bench_engines.GenAI) and genai.weight_format == "int4"
    assert genai.prompt_lookup is None  # a row without prompt lookup ignores the drafts
    optimum = bench_engines.make_engine("optimum-int8", "m")
    assert isinstance(optimum, bench_engines.HFGenerate) and optimum.optimum_format == "int8"
    assert get_engine("genai-int8-pl").takes_drafts and not get_engine("genai-int8").takes_drafts


def test_a_row_cannot_carry_what_the_registry_refuses() -> None:
    with pytest.raises(ChatlabError, match="takes no option max_seqs"):
        bench_engines._row("x", "openvino", "int8", max_seqs=2)
    with pytest.raises(UnknownNameError, match="valid choices: paged, sdpa"):
        bench_engines._row("x", "openvino", "int8", attention="flash")
    with pytest.raises(UnknownNameError, match="weight format for the torch backend"):
        bench_engines._row("x", "torch", "int8")
    with pytest.raises(UnknownNameError, match="engine runtime 'vllm'"):
        bench_engines._row("x", "vllm", "fp32")
    with pytest.raises(UnknownNameError, match="weight format for llama.cpp"):
        bench_engines._row("x", "llama.cpp", "int8")


def test_a_new_row_is_taken_everywhere_the_bench_reads_names(monkeypatch: pytest.MonkeyPatch) -> None:
    row = EngineRow("chatlab-openvino-int8-threads2", "openvino", "int8", "extra", {"threads": 2})
    monkeypatch.setitem(ENGINE_ROWS, row.name, row)
    assert BenchConfig.make("m", engines=[row.name]).engines == [row.name]
    assert row.name in engine_table()
    with pytest.raises(UnknownNameError, match=f"valid choices: .*{row.name}"):
        get_engine("nope")


def test_the_cli_and_the_server_take_backend_names_from_the_registry() -> None:
    parser = build_parser()
    for command in (["serve"], ["complete", "--messages", "m.json"]):
        for name in REGISTRY:
            assert parser.parse_args([*command, "--backend", name]).backend == name
    from chatlab.engine import load_engine
    from chatlab.cli.serve import engine_options

    args = parser.parse_args(["serve", "--backend", "vllm"])
    with pytest.raises(UnknownNameError, match="valid choices: " + ", ".join(REGISTRY)):
        load_engine(**engine_options(args))  # refused by the registry before anything loads


def test_the_fast_rows_carry_the_fast_profile(monkeypatch: pytest.MonkeyPatch, fake_cpu: Any) -> None:
    fake_cpu(bf16=False)  # the fallback, said in the facts
    loop = bench_engines.make_engine("chatlab-fast", "m")
    assert isinstance(loop, bench_engines.ChatlabLoop) and loop.fast and loop.precision is None
    assert loop.args == ("m", "openvino", "int4")
    pl = bench_engines.make_engine("chatlab-fast-pl", "m")
    assert isinstance(pl, bench_engines.ChatlabLoop) and pl.speculate is not None
    asked: dict[str, Any] = {}

    class Loaded(Exception):
        pass

    def record(*args: Any, **options: Any) -> None:
        asked.update(options)
        raise Loaded  # stop before preparing a real backend

    monkeypatch.setattr("chatlab.backends.load_step_backend", record)
    with pytest.raises(Loaded):
        pl.load()
    assert asked["fast"] is True and asked["dynamic_quantization"] is False  # the verify pass needs it off
    genai = bench_engines.make_engine("genai-fast", "m")
    assert isinstance(genai, bench_engines.GenAI) and genai.weight_format == "int4"
    assert (genai.precision, genai.kv_cache, genai.dynamic_quantization) == ("f32", "u8", True)
    facts = genai.facts()["compute"]
    assert "bf16 is not among" in facts and "KV cache u8 and dynamic quantization on asked" in facts
    assert BenchConfig.make("m", fast=True).engines == bench_engines.FAST_ENGINES
