"""`chatlab bench speculate` (chatlab.lab.bench.speculate_run) on stand-in workers:
every task runs in each pair, ratios come from the pair's own baseline runs, each target is
judged MET, MISSED or NOT RUN with the reason, and the JSON is written whole."""
from __future__ import annotations

import json

import pytest

from chatlab.errors import ChatlabError
from chatlab.lab.bench import engines, sidebyside, speculate_run
from chatlab.lab.bench.llamacpp import ENGINE as LLAMA_CPP
from chatlab.lab.bench.runner import call_in_child, plan_groups

# decode tok/s per engine on copy-heavy tasks; the story copies nothing, so prompt lookup
# gains nothing there (and here costs 2%)
SPEED = {"genai-int8": 50.0, "chatlab-openvino-int8": 52.0, "chatlab-openvino-int8-pl": 80.0,
         "genai-int8-pl": 70.0, "chatlab-openvino-int4": 55.0, "chatlab-openvino-int4-pl": 60.0,
         "genai-int4": 50.0, "genai-int4-pl": 62.0, "genai-fast": 60.0, "chatlab-fast": 66.0,
         "chatlab-fast-pl": 90.0}


class Worker:
    open = 0
    peak = 0
    calls: list[tuple[str, int]] = []
    stops: list[tuple[str, bool | None]] = []

    def __init__(self, engine, model, precision, *extra):
        self.engine, self.load_s, self.precision, self.threads, self.compute = engine, 0.1, precision, 2, None
        self.extra = extra
        Worker.open += 1
        Worker.peak = max(Worker.peak, Worker.open)

    def ask(self, request):
        ids, n = request["ids"], request["tokens"]
        Worker.calls.append((self.engine, ids[0]))
        Worker.stops.append((self.engine, request.get("stop_at_eos")))
        copy = ids[0] != 3  # the story's ids start with 3 in the stand-in cases
        speed = SPEED[self.engine] if copy or not self.engine.endswith("-pl") else SPEED["genai-int8"] * 0.98
        answer = {"ttft_s": 0.1, "decode_tok_s": speed, "tokens": [i % 7 for i in ids][:n]}
        if self.engine.endswith("-pl"):
            answer["spec"] = {"tokens_per_step": 2.0 if copy else 1.0, "acceptance": 0.5}
        return answer

    def alive(self):
        return True

    def close(self):
        Worker.open -= 1
        return 300.0

    def kill(self):
        pass


CASES = {"extract": [[0, 1, 2], [0, 2, 2]], "rag": [[1, 5], [1, 6]], "rewrite": [[2, 2], [2, 3]],
         "story": [[3, 1], [3, 2]]}


@pytest.fixture
def part(monkeypatch):
    monkeypatch.setattr(sidebyside, "task_cases_in_child", lambda model, tasks, limit: CASES)
    monkeypatch.setattr(engines, "unavailable",  # as on a machine without llama-cpp-python
                        lambda name, precision: "not installed here" if name == LLAMA_CPP else None)
    Worker.open, Worker.peak, Worker.calls, Worker.stops = 0, 0, [], []
    return sidebyside.run_tasks("m", speculate_run.SIDE_BY_SIDE, speculate_run.TASKS, rounds=2, tokens=4,
                                speculate={"draft_tokens": 4, "ngram": 3}, progress=False,
                                make_worker=Worker, stop_at_eos=True)


def test_every_task_runs_in_each_pair_with_paired_ratios(part):
    assert Worker.peak == 2 and Worker.open == 0
    by = {r["name"]: r for r in part["engines"]}
    assert LLAMA_CPP not in by and part["skipped"] == [{"name": LLAMA_CPP, "reason": "not installed here"}]
    pl = by["chatlab-openvino-int8-pl"]["tasks"]
    assert pl["rag"]["decode_tok_s_ratio"] == pytest.approx(80 / 50)
    assert pl["rag"]["tokens_per_step"] == 2.0 and pl["story"]["tokens_per_step"] == 1.0
    assert by["genai-int8"]["tasks"]["extract"]["decode_tok_s_ratio"] == 1.0
    timed = [c for c in Worker.calls if c[0] == "chatlab-openvino-int8-pl"]
    assert len(timed) == 4 + 2 * 4  # one warm-up per task, then one case per task per round
    assert {ids0 for _, ids0 in timed} == {0, 1, 2, 3}
    # the timed cases end at the reply's end token (the warm-ups' 4 tokens are not timed)
    assert part["stop_at_eos"] is True
    pl = [stop for engine, stop in Worker.stops if engine == "chatlab-openvino-int8-pl"]
    assert pl == [None] * 4 + [True] * 8


def test_the_bench_loop_stops_at_eos_only_when_asked():
    """chatlab's bench engine: exactly n tokens past the end token by default, the reply up to
    its end token with stop_at_eos (the other engines' flags are their own APIs': min_new_tokens,
    ignore_eos)."""
    import numpy as np

    from chatlab.lab.bench.engines import ChatlabLoop
    from markov_backend import MarkovBackend

    table = np.full((4, 4), -5.0)
    table[0, 1] = table[1, 2] = table[2, 3] = table[3, 0] = 5.0  # 0 -> 1 -> 2 -> 3 -> 0 ...
    backend = MarkovBackend(table)
    backend.eos_ids = [3]
    loop = ChatlabLoop("m", "openvino", "int8")
    loop.backend = backend
    assert loop.run([0], 8).tokens == [1, 2, 3, 0, 1, 2, 3, 0]
    assert loop.run([0], 8, stop_at_eos=True).tokens == [1, 2, 3]


def test_targets_are_judged_with_reasons(part):
    verdicts = {(t["what"], t["task"]): t for t in speculate_run.judge_tasks(part)}
    assert verdicts[("copy-heavy decode vs genai plain", "rag")]["verdict"] == "MET"  # 1.6x
    # the extraction has no speed target over genai plain: its oracle bound is printed instead
    assert ("copy-heavy decode vs genai plain", "extract") not in verdicts
    assert ("int4: decode vs genai-int4 plain", "extract") not in verdicts
    assert verdicts[("copy-heavy decode vs genai prompt lookup", "rag")]["ratio"] == pytest.approx(80 / 70, abs=1e-3)
    assert verdicts[("int4: decode vs genai-int4 plain", "rewrite")]["verdict"] == "MISSED"  # 1.2x
    assert verdicts[("no-copy decode vs genai plain", "story")]["verdict"] == "MET"  # 0.98x
    assert verdicts[("no-copy decode vs chatlab plain", "story")]["verdict"] == "MISSED"  # 49/52
    moon = verdicts[("moonshot: int4 decode vs llama.cpp-q4_1", "extract")]
    assert moon["verdict"] == "NOT RUN (llama.cpp-q4_1: not installed here)" and moon["ratio"] is None
    assert speculate_run.identical_replies(part) == {
        "chatlab-openvino-int8-pl == chatlab-openvino-int8": True,
        "chatlab-openvino-int4-pl == chatlab-openvino-int4": True}


def test_turn_target_report_and_json(part, tmp_path):
    turns = {"turns": [{"turn": 1, "prompt_tokens": 200, "reuse_ttft_ms": 100.0, "plain_ttft_ms": 100.0,
                        "genai-chat_ttft_ms": 90.0, "reuse/plain": 1.0, "reuse/genai-chat": 100 / 90},
                       {"turn": 2, "prompt_tokens": 400, "reuse_ttft_ms": 60.0, "plain_ttft_ms": 200.0,
                        "genai-chat_ttft_ms": 80.0, "reuse/plain": 0.3, "reuse/genai-chat": 0.75}]}
    [turn] = speculate_run.judge_turns(turns)
    assert turn["what"].startswith("turn-2 TTFT") and turn["ratio"] == 0.75 and turn["verdict"] == "MET"
    replies = {"extract": [{"prompt": [5, 6, 7, 8], "reply": [5, 6, 7, 8, 2, 9]}] * 3,
               "rag": [{"prompt": [1], "reply": [3, 4]}] * 3}
    result = {"model": "m", "cpu": None, "tasks": part, "turns": turns,
              "identical": speculate_run.identical_replies(part),
              "targets": speculate_run.judge_tasks(part) + [turn],
              "oracle": speculate_run.oracle_bounds(part, replies)}
    table = speculate_run.format_report(result)
    assert "  extract: 1.54x / 2.86x over 2 cases" in table  # 80/52; the oracle: 4 tokens in one 1+3 pass
    assert "  rag: 1.54x / 1.00x over 2 cases" in table and "  rewrite: 1.54x / no recorded replies" in table
    assert "turn 2 (400): 60 / 200 / 80" in table
    assert "chatlab-openvino-int8-pl tokens per model pass: extract 2.00" in table
    assert "copy-heavy decode vs genai plain              rag             1.60x  >= 1.25 MET" in table
    assert "up to 4 new tokens per task case, each reply ending at its end token" in table
    lesson = speculate_run.format_report(result, targets=False)  # what docs/benchmarks.md quotes
    assert "turn 2 (400)" in lesson and "MET" not in lesson and "target" not in lesson
    from chatlab.lab.bench.report import write_json

    path = write_json(result, tmp_path / "bench" / "run.json")
    assert json.loads(path.read_text())["targets"][-1]["verdict"] == "MET"
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # no temporary file left


class Crashing(Worker):
    """genai-int4-pl's process dies on its first timed request, as a worker killed by a signal."""

    class proc:  # noqa: N801 - stands in for the Popen object
        @staticmethod
        def poll():
            return -4

    def ask(self, request):
        from chatlab.errors import ChatlabError

        if self.engine == "genai-int4-pl" and request["tokens"] > 4:
            raise ChatlabError("benchmark engine genai-int4-pl failed:\n")
        return super().ask(request)


def test_an_engine_that_dies_mid_run_is_a_skipped_row_not_a_failed_run(monkeypatch):
    from chatlab.errors import ChatlabError

    monkeypatch.setattr(sidebyside, "task_cases_in_child", lambda model, tasks, limit: CASES)
    part = sidebyside.run_tasks("m", ["genai-int8", "genai-int4-pl", "chatlab-openvino-int8-pl"],
                                ["rag"], rounds=1, tokens=8, progress=False, make_worker=Crashing)
    assert [r["name"] for r in part["engines"]] == ["genai-int8", "chatlab-openvino-int8-pl"]
    assert part["skipped"] == [{"name": "genai-int4-pl", "reason": "genai-int4-pl failed during the run "
                                "(killed by SIGILL): benchmark engine genai-int4-pl failed:"}]
    assert part["engines"][1]["tasks"]["rag"]["decode_tok_s_ratio"] == pytest.approx(80 / 50)
    with pytest.raises(ChatlabError, match="genai-int4-pl failed"):  # the baseline itself: no run
        sidebyside.run_tasks("m", ["genai-int4-pl", "genai-int4"], ["rag"], rounds=1, tokens=8,
                             progress=False, make_worker=Crashing)


def test_a_run_where_no_engine_can_run_lists_them_all_as_skipped(monkeypatch):
    monkeypatch.setattr(sidebyside, "task_cases_in_child", lambda model, tasks, limit: CASES)
    monkeypatch.setattr(engines, "unavailable", lambda name, precision: "not installed here")
    assert plan_groups([]) == []
    part = sidebyside.run_tasks("m", [LLAMA_CPP], ["rag"], rounds=1, tokens=4, progress=False, make_worker=Worker)
    assert part["engines"] == [] and part["skipped"] == [{"name": LLAMA_CPP, "reason": "not installed here"}]


def test_the_baseline_keeps_its_peak_memory_over_its_pairs(monkeypatch):
    """The baseline runs in every pair: its row keeps the largest resident memory of them, not
    the last pair's."""
    closed = []

    class Shrinking(Worker):
        def close(self):
            super().close()
            closed.append(self.engine)
            return 500.0 - 100 * len(closed)  # the first pair's processes grew the most

    monkeypatch.setattr(sidebyside, "task_cases_in_child", lambda model, tasks, limit: CASES)
    part = sidebyside.run_tasks("m", ["genai-int8", "chatlab-openvino-int8", "chatlab-openvino-int8-pl"],
                                ["rag"], rounds=1, tokens=8, progress=False, make_worker=Shrinking)
    rss = {r["name"]: r["rss_mb"] for r in part["engines"]}
    assert rss == {"genai-int8": 400.0, "chatlab-openvino-int8": 300.0, "chatlab-openvino-int8-pl": 100.0}


def test_bad_sizes_are_refused(capsys):
    from chatlab.cli import main

    def refused(*flags):
        assert main(["bench", "speculate", *flags]) == 2
        return capsys.readouterr().err

    assert ("chatlab bench speculate: error: --rounds and --turn-tokens must be >= 1, --tokens >= 2, "
            "--turns >= 0") in refused("--rounds", "0")
    assert "draft_tokens=40" in refused("--draft-tokens", "40")
    # 0 is a value, not "left out": it is refused, not replaced by the default
    assert "draft_tokens=0" in refused("--draft-tokens", "0")
    assert "ngram=0" in refused("--ngram", "0")


def test_the_cli_hands_every_option_to_the_run(monkeypatch):
    from chatlab.cli import main

    seen = []
    monkeypatch.setattr(speculate_run, "run", seen.append)
    assert main(["bench", "speculate", "--rounds", "8", "--engines", "genai-int8,chatlab-openvino-int8-pl,",
                 "--ignore-eos", "--machine", "a VM"]) == 0
    assert seen == [speculate_run.SpeculateRun(
        rounds=8, engines=("genai-int8", "chatlab-openvino-int8-pl"), ignore_eos=True, machine="a VM",
        command="chatlab bench speculate --rounds 8 --engines genai-int8,chatlab-openvino-int8-pl, "
                "--ignore-eos --machine a VM")]
    assert seen[0].out == speculate_run.OUT


def test_the_fast_run_is_judged_against_llama_cpp_and_genai_with_the_same_settings(monkeypatch):
    monkeypatch.setattr(sidebyside, "task_cases_in_child", lambda model, tasks, limit: CASES)
    monkeypatch.setattr(engines, "unavailable",
                        lambda name, precision: "not installed here" if name == LLAMA_CPP else None)
    part = sidebyside.run_tasks("m", speculate_run.FAST_ENGINES, speculate_run.TASKS, rounds=1, tokens=4,
                                progress=False, make_worker=Worker)
    assert part["baseline"] == "genai-fast"  # genai given the same settings anchors the pairs
    verdicts = {(t["what"], t["task"]): t for t in speculate_run.judge_tasks(part)}
    assert verdicts[("fast: decode vs genai, same settings", "story")]["ratio"] == pytest.approx(66 / 60, abs=1e-3)
    assert verdicts[("fast: decode vs llama.cpp-q4_1", "story")]["verdict"] == (
        "NOT RUN (llama.cpp-q4_1: not installed here)")
    assert ("fast + prompt lookup: decode vs llama.cpp", "story") not in verdicts
    assert ("fast + prompt lookup: decode vs llama.cpp", "rag") in verdicts
    assert not any(t["what"].startswith("copy-heavy") for t in verdicts.values())
    result = {"model": "m", "cpu": {"model": "Test CPU 9000", "flags": [], "threads": 2}, "tasks": part,
              "turns": None, "identical": {}, "targets": speculate_run.judge_tasks(part)}
    report = speculate_run.format_report(result)
    assert "CPU: Test CPU 9000" in report and "skipped llama.cpp-q4_1: not installed here" in report


def test_a_function_runs_in_a_child_with_its_arguments_and_result_as_json() -> None:
    """The bench renders its prompts in a short-lived child (call_in_child): lists, None and
    numbers cross both ways, and a failure names what was being done and the child's error."""
    assert call_in_child(plan_groups, ["a", "b", "c"], "b", what="planning") == [["b", "a"], ["b", "c"]]
    assert call_in_child(plan_groups, ["a", "b"], None, what="planning") == [["a", "b"]]
    with pytest.raises(ChatlabError, match="planning failed: TypeError: .*plan_groups"):
        call_in_child(plan_groups, what="planning")
