"""The exercise checks: the verdicts, and every exercise's reference passing its own cases.

The notebooks' solution cells are checked against these same exercises in
tests/test_notebook_exercises.py; here the grading itself is tested: a stub reports "not
attempted yet", a wrong answer names its first failing case, a function that raises is a
failure (not a traceback), and a right one ends with the ✓ line.
"""
from __future__ import annotations

import pytest

from chatlab.errors import ChatlabError
from chatlab.lab.exercises import check, exercise_names, run
from chatlab.lab.exercises import nb04


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("name", ["nb03.stop_matcher", "nb03.top_p", "nb04.react_buffer", "nb04.schema_problems"])
def test_a_stub_is_not_attempted_yet(name: str) -> None:
    report = run(name, stub)
    assert report.status == "not attempted" and report.passed == 0
    assert "not attempted yet" in report.text and "✓" not in report.text


def test_a_wrong_answer_names_its_first_failure_with_input_expected_and_got() -> None:
    report = run("nb03.stop_matcher", lambda deltas, stops: (["".join(deltas)], None))
    assert report.status == "fail" and report.passed < report.total
    assert "first failure, case 1" in report.text
    for part in ("input:", "expected:", "got:", "'Observation:'"):
        assert part in report.text


def test_a_function_that_raises_is_a_failure_not_a_traceback() -> None:
    report = run("nb04.schema_problems", lambda arguments: {}["missing"])
    assert report.status == "fail" and "raised KeyError" in report.text


def test_a_partly_right_answer_counts_the_cases_that_pass() -> None:
    import numpy as np

    report = run("nb03.top_p", lambda probs, p: 1)   # right only where one token is enough
    assert report.status == "fail" and 0 < report.passed < report.total
    assert f"{report.passed} of {report.total} cases pass" in report.text
    exact = run("nb03.top_p", lambda probs, p: int(np.searchsorted(np.cumsum(probs), p)) + 1)
    assert exact.ok and exact.text.startswith("✓") and f"all {exact.total} cases pass" in exact.text


def test_check_prints_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    check("nb04.schema_problems", stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_an_unknown_name_says_what_exists() -> None:
    with pytest.raises(ChatlabError, match="nb04.react_buffer"):
        run("nb04.no_such_thing", stub)
    with pytest.raises(ChatlabError, match="names look like"):
        run("nb99.anything", stub)


def test_streaming_everything_at_the_end_fails_the_react_buffer() -> None:
    """Right content and call, but nothing sent until the end: not a streaming buffer."""
    def hold_all(pieces, names):
        sent, call = nb04.react_relay_reference(pieces, names)
        return [""] * (len(sent) - 1) + ["".join(sent)], call
    report = run("nb04.react_buffer", hold_all)
    assert report.status == "fail"


def test_leaking_call_markup_fails_the_react_buffer() -> None:
    def leak(pieces, names):
        sent, call = nb04.react_relay_reference(pieces, names)
        return list(pieces) + [""], call   # forwards the text as it arrives
    assert run("nb04.react_buffer", leak).status == "fail"


@pytest.mark.parametrize("module", ["nb01", "nb02", "nb04"])
def test_each_reference_passes_its_own_cases(module: str) -> None:
    import importlib

    mod = importlib.import_module(f"chatlab.lab.exercises.{module}")
    from chatlab.lab.exercises import _REGISTRY

    names = exercise_names(module)
    assert names, f"{module} registers no exercise"
    for name in names:
        assert run(name, _REGISTRY[name].reference).ok, name
    assert mod is not None


def test_the_stop_matcher_reference_passes_and_a_matcher_without_holdback_fails() -> None:
    from chatlab.lab.exercises.nb03 import stop_stream_reference

    assert run("nb03.stop_matcher", stop_stream_reference).ok

    def no_holdback(deltas, stops):   # cuts at a stop it sees whole, but shows partial ones
        shown, text = [], ""
        for d in deltas:
            text += d
            hits = [text.find(s) for s in stops if s in text]
            if hits:
                cut = min(hits)
                shown.append(text[len("".join(shown)):cut] if cut >= len("".join(shown)) else "")
                return shown, next(s for s in stops if text.find(s) == cut)
            shown.append(d)
        return shown + [""], None
    assert run("nb03.stop_matcher", no_holdback).status == "fail"


@pytest.mark.slow
def test_the_kv_exercises_pass_with_the_package_and_fail_with_a_wrong_position() -> None:
    """The stateless export (cached after the first export): the reference forward passes; one
    that restarts positions at 0 on every call (a classic mistake) does not."""
    import numpy as np

    from chatlab.lab.exercises import _REGISTRY
    from chatlab.lab.exercises.nb03 import _default_kv

    kv = _default_kv()
    for name in ("nb03.kv_forward", "nb03.fourth_token"):
        assert run(name, _REGISTRY[name].reference, kv=kv).ok, name
    assert run("nb03.cache_bytes", lambda layers, heads, positions, head_dim, size:
               layers * 2 * heads * positions * head_dim * size, kv=kv).ok
    assert run("nb03.cache_bytes", lambda layers, heads, positions, head_dim, size:
               layers * heads * positions * head_dim * size, kv=kv).status == "fail"  # keys only

    def positions_from_zero(kv, ids, past):
        n = next(iter(past.values())).shape[2] + len(ids)
        out = kv.request.infer({"input_ids": np.asarray([ids], dtype=np.int64),
                                "attention_mask": np.ones((1, n), dtype=np.int64),
                                "position_ids": np.arange(len(ids), dtype=np.int64)[None, :], **past})
        return out["logits"][0, -1], {k: out["present." + k[len("past_key_values."):]] for k in kv.past_names}
    report = run("nb03.kv_forward", positions_from_zero, kv=kv)
    assert report.status == "fail" and report.passed >= 1   # prefill is right, decode is not
