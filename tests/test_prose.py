"""Figures the notebooks' prose quotes are the figures their stored outputs show: each quoted
figure below is in its markdown cell and, beside it, in the output it reads from. A re-stored
output that moves a figure fails here, naming the cell whose prose to update."""
from __future__ import annotations

import re

import pytest

from chatlab.lab import route

# (notebook, markdown cell, the figure as the prose quotes it, code cell, the same figure as its output shows it)
QUOTED = [
    ("07", 20, "20/33", 19, "| (f) extractive schema + few-shot turns | 33/33 | 20/33 | not installed |"),
    ("07", 20, "33/33 in every row", 19, "| (a) functions, legacy chain | 33/33 |"),
    ("07", 20, "it was not installed when this notebook was stored", 19, "| not installed |"),
    ("08", 25, "24/24 against 5/24", 24, "gold answers replayed (ceiling) 24/24"),
    ("08", 25, "24/24 against 5/24", 24, "smollm2-135m-instruct 5/24"),
    ("08", 25, "it was not when this notebook was stored", 24, "(optional asset) not installed"),
    ("04", 35, "it was not when this notebook was stored", 34, "Qwen2.5-Coder-0.5B: not installed"),
    ("05", 29, "median over five rounds", 30, "--rounds 5"),
    ("05", 29, "other agents sat idle or edited files", 30, "other agents on the machine idle or editing"),
    ("05", 31, "1.09x, 1.47x and 1.98x", 30, "chatlab-openvino-int8-pl 58.6 (1.09x) 156 73.2 (1.47x) 330 107.2 (1.98x)"),
    ("05", 31, "story, which copies nothing, at 1.01x", 30, "56.0 (1.01x)"),
    ("05", 31, "(1.07 tokens per pass)", 30, "chatlab-openvino-int8-pl tokens per model pass: extract 1.07"),
    ("05", 31, "0.60-0.72x", 30, "genai-int8-pl 39.7 (0.65x) 150 44.3 (0.72x) 327 82.7 (1.51x) 209 35.1 (0.60x)"),
    ("05", 31, "extraction (1.49x against 1.51x)", 30, "llama.cpp-q4_1 89.7 (1.49x)"),
    ("05", 31, "extraction (1.49x against 1.51x)", 30, "chatlab-openvino-int4-pl 88.9 (1.51x) 130 87.5 (1.46x) 290 120.6 (2.00x)"),
    ("05", 31, "(1.73x against 1.46x)", 30, "90.1 (1.73x) 719 81.0 (1.43x)"),
    ("05", 31, "(1.43x against 2.00x)", 30, "81.0 (1.43x)"),
    ("05", 34, "(10/33, 12/24)", 35, "exact 52.2 (the reference) 10/33 12/24"),
    ("09", 52, "2/12 answers differ", 38, "merged bf16 100% 2/12"),
    ("09", 52, "0/12 differing", 38, "merged fp32 100% 0/12"),
]
# Figures these cells once quoted that no stored output shows.
GONE = [("07", 20, "18/33"), ("08", 25, "20 of 24"), ("04", 35, "`_call`"), ("05", 9, "seven engines"),
        ("05", 29, "quiet machine"), ("05", 29, "eight rounds"), ("05", 31, "1.48x"), ("05", 31, "0.97x"),
        ("06", 19, "live server"), ("09", 52, "a merged or bf16 copy")]
WORDS = {7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def flat(text: str) -> str:
    return re.sub(r"[ \t\n]+", " ", text).strip()


def output_text(cell: object) -> str:
    outs = cell.get("outputs", [])  # type: ignore[attr-defined]
    return flat(" ".join(o.get("text") or o.get("data", {}).get("text/markdown", "") for o in outs))


@pytest.mark.parametrize(("number", "md", "figure", "code", "shown"), QUOTED,
                         ids=[f"{q[0]}c{q[1]}-{q[2][:20]}" for q in QUOTED])
def test_a_quoted_figure_is_in_the_output_beside_it(number: str, md: int, figure: str, code: int, shown: str) -> None:
    cells = route.read(number)
    assert cells[md].cell_type == "markdown" and figure in flat(cells[md].source), \
        f"notebook {number} cell {md} no longer quotes {figure!r}: update QUOTED with the prose"
    assert flat(shown) in output_text(cells[code]), \
        f"notebook {number} cell {code}'s stored output no longer shows {shown!r}: update cell {md}'s prose"


@pytest.mark.parametrize(("number", "md", "figure"), GONE, ids=[f"{g[0]}c{g[1]}-{g[2]}" for g in GONE])
def test_a_figure_no_output_shows_is_not_quoted(number: str, md: int, figure: str) -> None:
    assert figure not in flat(route.read(number)[md].source)


def test_05s_engine_count_is_the_stored_runs() -> None:
    cells = route.read("05")
    lines = next(o["text"] for o in cells[10].outputs if o.get("text")).splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("engine "))
    rows = [line for line in lines[start + 1:] if re.match(r"\S+ +f32 ", line)]   # one per engine
    assert f"all {WORDS[len(rows)]} engines" in flat(cells[9].source)


def test_05_quotes_07s_and_08s_own_scores() -> None:
    assert "| 20/33 |" in output_text(route.read("07")[19])
    assert "smollm2-135m-instruct 5/24" in output_text(route.read("08")[24])
    assert "08's RAG answers (5/24)" in flat(route.read("05")[34].source)


def test_06s_solutions_do_not_touch_the_live_server() -> None:
    cells = route.read("06")
    solutions = [c.source for c in cells if c.cell_type == "code" and c.source.startswith("#@title Solution")]
    assert len(solutions) == 3
    assert not [s for s in solutions if re.search(r"\b(server|client|httpx)\b", s)]
    assert "prints only the check's verdict" in flat(cells[19].source)
