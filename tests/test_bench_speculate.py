"""The bench's speculation rows, task shapes and the CLI flags, without loading a model."""
from __future__ import annotations

import argparse

import pytest

from chatlab.lab.bench.engines import SPECULATIVE_ENGINES, ChatlabLoop, GenAI, make_engine
from chatlab.lab.bench.report import add_ratios, format_table
from chatlab.lab.bench.runner import BenchConfig, Samples
from chatlab.lab.evals.retrieval import COPY_TASKS, TASKS, task_messages
from chatlab.engine import load_engine
from chatlab.cli.args import add_speedup_args, speculation_from_args, speedups_from_args
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.generate.speculate import Speculation


def test_task_shapes_come_from_the_eval_sets():
    from chatlab.lab.evals.sets import load_dogs, load_questions

    assert len(task_messages("extract")) == len(load_dogs())
    assert len(task_messages("rag")) == len(load_questions())
    dogs = load_dogs()
    assert dogs[0].text in task_messages("extract")[0][0]["content"]
    assert all("Passage:" in m[0]["content"] for m in task_messages("rag"))
    assert len(task_messages("rewrite")) >= 5 and len(task_messages("story")) >= 3
    with pytest.raises(UnknownNameError):
        task_messages("poem")


def test_speculate_adds_the_speculative_rows_and_validates_the_task():
    config = BenchConfig.make("m", speculate=Speculation(draft_tokens=6, ngram=2), task="rag")
    assert all(e in config.engines for e in SPECULATIVE_ENGINES)
    assert config.speculate == {"draft_tokens": 6, "ngram": 2} and config.task == "rag"
    explicit = BenchConfig.make("m", engines=["genai-int8"], speculate=Speculation())
    assert explicit.engines == ["genai-int8"]  # --engines is taken as given
    with pytest.raises(UnknownNameError, match="bench task"):
        BenchConfig.make("m", task="poem")


def test_engine_names_map_to_their_settings():
    pl = make_engine("chatlab-openvino-int4-pl", "m", speculate={"draft_tokens": 5, "ngram": 2})
    assert isinstance(pl, ChatlabLoop) and pl.args[2] == "int4"
    assert pl.speculate == Speculation(draft_tokens=5, ngram=2) and not pl.dynamic_quantization
    nodq = make_engine("chatlab-openvino-int8-nodq", "m")
    assert nodq.speculate is None and not nodq.dynamic_quantization
    g = make_engine("genai-int8-pl", "m")
    assert isinstance(g, GenAI) and g.prompt_lookup == {"draft_tokens": 4, "ngram": 3}
    assert make_engine("genai-int8", "m").prompt_lookup is None
    assert make_engine("chatlab-openvino-int8", "m").dynamic_quantization is None  # f32's default


def result_with(task):
    rows = []
    for name, decode, extra in (("genai-int8", 50.0, {}), ("genai-int8-pl", 60.0, {}),
                                ("chatlab-openvino-int8-pl", 80.0,
                                 {"tokens_per_step": 2.5, "acceptance": 0.6})):
        rows.append({"name": name, "decode_tok_s": decode, "decode_tok_s_range": (decode, decode),
                     "ttft_ms": 100.0, "ttft_ms_range": (100.0, 100.0), "ttft_long_ms": 900.0,
                     "ttft_long_ms_range": (900.0, 900.0), "rss_mb": 300.0, **extra})
    result = {"model": "m", "rounds": 1, "new_tokens": 8, "prompt_tokens": {"short": 80, "long": 1000},
              "baseline": "genai-int8", "engines": rows, "task": task}
    add_ratios(result)
    return result


def test_report_shows_tokens_per_step_and_the_task_targets():
    copy = result_with("rag")
    targets = {(t["metric"], t["versus"]): t for t in copy["targets"]
               if t["engine"] == "chatlab-openvino-int8-pl"}
    assert targets[("decode_tok_s", "genai-int8")]["ratio"] == 1.6 and targets[("decode_tok_s", "genai-int8")]["met"]
    assert targets[("decode_tok_s", "genai-int8-pl")]["ratio"] == pytest.approx(80 / 60, abs=1e-3)
    table = format_table(copy)
    assert "chatlab-openvino-int8-pl speculates: 2.50 tokens per model pass, 60%" in table
    assert "task: rag" in table
    # the extraction keeps the targets against genai's prompt lookup, not the 1.25x over genai plain
    bounded = {(t["metric"], t["versus"]) for t in result_with("extract")["targets"]
               if t["engine"] == "chatlab-openvino-int8-pl"}
    assert ("decode_tok_s", "genai-int8-pl") in bounded and ("decode_tok_s", "genai-int8") not in bounded
    story = result_with("story")
    assert [t["target"] for t in story["targets"] if t["engine"].endswith("-pl")] == [">= 0.97"]
    assert "extract" in COPY_TASKS and "story" in TASKS and "story" not in COPY_TASKS


def test_samples_keep_speculation_counts():
    s = Samples()
    short = {"decode_tok_s": 1.0, "ttft_s": 0.1, "spec": {"tokens_per_step": 2.0, "acceptance": 0.5}}
    s.add("e", short, {"ttft_s": 1.0}, partner=None)
    assert s.all["e"]["tokens_per_step"] == [2.0] and s.all["e"]["acceptance"] == [0.5]


def parse(*argv):
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="openvino")
    add_speedup_args(p)
    return p.parse_args(list(argv))


def test_cli_flags():
    assert speculation_from_args(parse()) is None and speedups_from_args(parse()) == {}
    args = parse("--speculate", "prompt-lookup", "--draft-tokens", "8", "--ngram", "2", "--reuse-prefix")
    assert speedups_from_args(args) == {"speculate": Speculation(draft_tokens=8, ngram=2),
                                        "reuse_prefix": True}
    with pytest.raises(ChatlabError, match="draft_tokens=99.*1 to 16"):
        speculation_from_args(parse("--speculate", "prompt-lookup", "--draft-tokens", "99"))
    with pytest.raises(ChatlabError, match="drive chatlab's own loop; the genai backend"):
        load_engine("m", "genai", **speedups_from_args(parse("--backend", "genai", "--speculate",
                                                             "prompt-lookup")))  # before a load
    assert speedups_from_args(parse("--backend", "genai", "--reuse-prefix")) == {"prefix_caching": True}
    with pytest.raises(SystemExit):  # argparse: not one of the methods
        parse("--speculate", "medusa")
