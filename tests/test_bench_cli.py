"""`chatlab bench` and its subcommands: the lab's measurements run from the one CLI, each handed
its options as plain values; argparse lives in chatlab/cli only. No model loads."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chatlab.cli import build_parser, main
from chatlab.cli.bench import run_bench

PACKAGE = Path(__file__).resolve().parents[1] / "chatlab"
SUBCOMMANDS = ["accuracy", "replay", "turns", "speculate", "serving", "store"]
# Run as `python -m` in child processes, by chatlab itself: not user commands
TRAMPOLINES = {"lab/bench/worker.py", "backends/child.py"}
UNUSED = {"render/bench.py", "tools/bench.py"}  # imported by nothing, left out of the check


def test_bench_lists_its_subcommands_and_times_engines_without_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--help"])
    out = capsys.readouterr().out
    assert all(f"\n    {name} " in out for name in SUBCOMMANDS), out
    args = build_parser().parse_args(["bench", "--quick", "--rounds", "2"])
    assert args.func is run_bench and args.bench_command is None and (args.quick, args.rounds) == (True, 2)


def test_serving_hands_the_backend_and_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatlab.lab.bench import serving

    seen: list[serving.ServingRun] = []
    monkeypatch.setattr(serving, "run", seen.append)
    assert main(["bench", "serving", "--backend", "genai", "--max-seqs", "3", "--clients", "8",
                 "--json"]) == 0
    assert seen == [serving.ServingRun(backend="genai", options={"max_seqs": 3}, clients=8, as_json=True)]


def test_serving_refuses_another_backends_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "serving", "--max-seqs", "3"]) == 2  # the default backend is openvino
    assert "chatlab bench serving: error: --max-seqs does not apply to --backend openvino" in capsys.readouterr().err


def test_options_before_a_subcommand_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--rounds", "1", "speculate"]) == 2
    assert ("chatlab bench speculate: error: --rounds 1: give the options after the subcommand, "
            "chatlab bench speculate --rounds 1 ...") in capsys.readouterr().err


def test_turns_hands_its_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatlab.lab.bench import turns

    seen = []
    monkeypatch.setattr(turns, "run", lambda *a, **k: seen.append((a, k)))
    assert main(["bench", "turns", "--turns", "3", "--tokens", "4", "--genai"]) == 0
    assert seen == [(("smollm2-135m-instruct", 3, 4), {"genai": True})]


def test_argparse_lives_in_the_cli_and_python_m_only_in_trampolines() -> None:
    parsers, mains = set(), set()
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
                parsers.add(rel)
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__" \
                    and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.comparators):
                mains.add(rel)
    assert parsers - UNUSED and all(rel.startswith("cli/") for rel in parsers - UNUSED), parsers
    assert mains - UNUSED == TRAMPOLINES, mains


def test_accuracy_hands_its_options_and_labels_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from chatlab.lab.bench import accuracy

    seen = []
    monkeypatch.setattr(accuracy, "measure", lambda *a: seen.append(a) or {"cpu": {"model": "Some CPU"}})
    argv = ["bench", "accuracy", "--limit", "1", "--tokens", "4", "--json", "--out", str(tmp_path / "a.json"),
            "--machine", "a test run"]
    assert main(argv) == 0
    assert seen == [("smollm2-135m-instruct", 1, 4)]
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["command"] == " ".join(["chatlab", *argv]) and run["machine"] == "a test run"


def test_a_growing_chat_longer_than_the_question_set_is_refused_before_any_turn() -> None:
    from chatlab.errors import ChatlabError
    from chatlab.lab.bench import turns

    for asked in (1000, 0, -1):
        with pytest.raises(ChatlabError, match=rf"the question set has 24 questions: ask for 1 to 24 turns "
                                               rf"from question 0, not {asked}$"):
            turns.growing_chat({}, turns=asked)
