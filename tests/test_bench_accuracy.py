"""`chatlab bench accuracy`: agreement counted to the first differing token, eval scores from
the same replies, and a real run of both profiles on a tiny slice."""
from __future__ import annotations

import json

import pytest

from chatlab.cli import main
from chatlab.errors import ChatlabError
from chatlab.lab.bench import accuracy


def test_agreement_counts_to_the_first_differing_token():
    exact = [{"ids": [1, 2, 3]}, {"ids": [4, 5, 6, 7]}]
    fast = [{"ids": [1, 2, 3]}, {"ids": [4, 9, 6, 7]}]
    assert accuracy.agreement(exact, fast) == {"cases": 2, "identical": 1, "mean_tokens_to_difference": 2,
                                               "min_tokens_to_difference": 1}


def test_scores_read_the_replies_as_the_eval_sets_do():
    from chatlab.lab.evals import load_dogs, load_facts, load_questions

    dog, question, fact = load_dogs()[0], load_questions()[0], load_facts()[0]
    right = {"extract": [{"text": f'Sure: {{"name": "{dog.name}", "color": "{dog.color}"}} as it says.'}],
             "rag": [{"text": f"It is {question.answer[0]}."}], "facts": [{"text": fact.answer[0].upper()}]}
    wrong = {"extract": [{"text": '{"name": "Nobody", "color": "plaid"}'}], "rag": [{"text": "no idea"}],
             "facts": [{"text": "no idea"}]}
    assert accuracy.scores(right, 1) == {"extraction (07)": [1, 1], "key phrases (08)": [1, 1], "facts (01)": [1, 1]}
    assert accuracy.scores(wrong, 1) == {"extraction (07)": [0, 1], "key phrases (08)": [0, 1], "facts (01)": [0, 1]}
    assert accuracy.first_json("no json {broken} then {\"a\": 1}") == {"a": 1}


def test_bad_sizes_are_refused():
    with pytest.raises(ChatlabError, match="--tokens must be >= 2 and --limit >= 1"):
        accuracy.measure(limit=0)


def test_a_tiny_real_run_of_both_profiles(tmp_path, capsys):
    out = tmp_path / "acc.json"
    assert main(["bench", "accuracy", "--limit", "1", "--tokens", "4", "--json", "--out", str(out),
                 "--machine", "a test run"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text())["agreement"] == result["agreement"]
    assert set(result["agreement"]) == {"extract", "rag", "rewrite", "story", "facts"}
    for a in result["agreement"].values():
        assert a["cases"] == 1 and 0 <= a["min_tokens_to_difference"] <= 4
    assert set(result["scores"]["fast"]) == {"extraction (07)", "key phrases (08)", "facts (01)"}
    assert result["compute"]["exact"].startswith("openvino-int8 at f32, KV cache f32")
    assert "KV cache u8" in result["compute"]["fast"] and "fast profile" in result["compute"]["fast"]
    assert result["decode_tok_s"]["exact"] > 0 and result["run"]["machine"] == "a test run"
