"""The sets behind the live bites (facts, weather requests) and the machine-and-date line."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from chatlab.errors import ChatlabError
from chatlab.lab.evals import load_facts, load_weather_requests, measured_on


def test_each_bite_set_has_at_least_20_rows_with_answers() -> None:
    facts, requests = load_facts(), load_weather_requests()
    assert len(facts) >= 20 and all(f.answer for f in facts)
    assert len(requests) >= 20
    for r in requests:   # the city is named in the request, so a right call can copy it
        assert r.location.lower() in r.request.lower(), r.id


def test_a_fact_row_without_answers_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "facts.jsonl"
    path.write_text('{"id": "a", "question": "q?", "answer": ["x"]}\n{"id": "b", "question": "q?", "answer": []}\n')
    with pytest.raises(ChatlabError, match="line 2.*'answer'"):
        load_facts(path)


def test_measured_on_names_cores_cpu_and_the_day() -> None:
    line = measured_on(dt.date(2026, 12, 1))
    assert re.fullmatch(r"\d+ cores?, .+, 2026-12-01", line), line
