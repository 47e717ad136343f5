"""Figures the notebooks' prose quotes are the figures their stored outputs show: each quoted
figure below is in its markdown cell and, beside it, in the output it reads from. A re-stored
output that moves a figure fails here, naming the cell whose prose to update."""
from __future__ import annotations

import re
from pathlib import Path

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
    ("05", 7, "a quiet 2-core VM without native bf16", 8,
     "machine: a quiet 2-core VM (AMD EPYC, AVX2 only, no bf16/AMX; nothing else running)"),
    ("05", 9, "decodes 64.0 tok/s", 8, "chatlab-openvino-int8 f32 2 64.0 [58.4-74.4] (1.01x)"),
    ("05", 9, "against PyTorch's 16.1", 8, "chatlab-torch f32 2 16.1 [13.8-16.4] (0.27x)"),
    ("05", 9, "fastest (1.48x)", 8, "llama.cpp-q4_1 f32 2 102.7 [94.6-112.9] (1.48x)"),
    ("05", 9, "slowest (2.53x on the long prompt)", 8, "5571 [5106-6366] (2.53x) 281"),
    ("05", 9, "least memory (281 MB)", 8, "(2.53x) 281"),
    ("05", 9, "1.64x genai's against 1.06x", 8, "3711 [3284-4279] (1.64x) 650"),
    ("05", 9, "1.64x genai's against 1.06x", 8, "2384 [2046-2593] (1.06x) 610"),
    ("05", 9, "genai's C++ (1.01x)", 8, "64.0 [58.4-74.4] (1.01x)"),
    ("09", 52, "2/12 answers differ", 38, "merged bf16 100% 2/12"),
    ("09", 52, "0/12 differing", 38, "merged fp32 100% 0/12"),
]
# Figures these cells once quoted that no stored output shows.
GONE = [("07", 20, "18/33"), ("08", 25, "20 of 24"), ("04", 35, "`_call`"), ("06", 19, "live server"),
        ("09", 52, "a merged or bf16 copy")]
# Claims about stored runs that the runs contradict, kept out of 05's prose and of docs/benchmarks.md,
# where 05's runs from other machines are read.
GONE_05 = ["seven engines", "quiet machine", "eight rounds", "rag 1.48x", "07's/08's scores"]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
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


@pytest.mark.parametrize("figure", GONE_05)
def test_05s_contradicted_figures_are_quoted_neither_in_05_nor_in_the_docs(figure: str) -> None:
    prose = " ".join(flat(c.source) for c in route.read("05") if c.cell_type == "markdown")
    assert figure not in prose and figure not in flat(DOCS.read_text())


def _stored_rows(cell: object) -> dict[str, list[float]]:
    """The stored engines table, by engine: decode, TTFT short, TTFT long (medians) and RSS."""
    lines = next(o["text"] for o in cell.outputs if o.get("text")).splitlines()  # type: ignore[attr-defined]
    start = next(k for k, line in enumerate(lines) if line.startswith("engine "))
    rows = {}
    for line in lines[start + 1:]:
        if m := re.match(r"(\S+) +f32 +\S+ +([\d.]+) \[.*?\) +([\d.]+) \[.*?\) +([\d.]+) \[.*?\) +(\d+)$", line):
            rows[m.group(1)] = [float(m.group(k)) for k in range(2, 6)]
    return rows


def test_05s_engine_count_is_the_stored_runs() -> None:
    cells = route.read("05")
    rows = _stored_rows(cells[8])
    assert f"all {WORDS[len(rows)]} engines" in flat(cells[7].source)


def test_05s_readings_of_the_stored_run_hold_in_its_table() -> None:
    """What 05's prose reads off the stored run without quoting a figure: llama.cpp decodes
    fastest, prefills the long prompt slowest, in the least memory; int4 gains nothing over int8;
    PyTorch and hf-generate run alike."""
    cells = route.read("05")
    prose = flat(cells[9].source)
    rows = _stored_rows(cells[8])
    decode, long_ttft, rss = ({n: r[k] for n, r in rows.items()} for k in (0, 2, 3))
    assert "llama.cpp trades one for the other" in prose
    assert max(decode, key=decode.__getitem__) == "llama.cpp-q4_1" == max(long_ttft, key=long_ttft.__getitem__)
    assert min(rss, key=rss.__getitem__) == "llama.cpp-q4_1"
    assert "it gains nothing over int8" in prose
    assert decode["chatlab-openvino-int4"] <= decode["chatlab-openvino-int8"]
    assert "`hf-generate`, the same fp32 weights, run alike" in prose
    assert abs(decode["hf-generate"] / decode["chatlab-torch"] - 1) < 0.1


def _stored_report(name: str) -> str:
    from chatlab.lab.bench.accuracy import trade_table
    from chatlab.lab.bench.report import load_stored, serving_table
    from chatlab.lab.bench.speculate_run import format_report

    show = {"serve-8-clients.json": serving_table, "accuracy.json": trade_table,
            "speculate-run.json": lambda r: format_report(r, targets=False)}[name]
    return flat(show(load_stored(name)))


# (the figure as docs/benchmarks.md quotes it, the stored run, the same figure as that run's report shows it)
DOCS_QUOTED = [
    ("| 1 | 39.2 |", "serve-8-clients.json", "1 39.2"),
    ("| 8 | 152.3 |", "serve-8-clients.json", "8 152.3"),
    ("Eight clients get 3.88x", "serve-8-clients.json", "ratio 3.88x;"),
    ("p50 955 ms / p95 993 ms", "serve-8-clients.json", "p50 955 ms, p95 993 ms"),
    ("3.96x (41.9 -> 165.8 tok/s)", "serve-8-clients.json", "ratio 3.96x (41.9 -> 165.8 tok/s)"),
    ("keeps 98% of the engine's own gain", "serve-8-clients.json", "the server keeps 98% of it"),
    ("OpenVINO loop at f32 in 4/4 cases", "serve-8-clients.json", "chatlab's OpenVINO loop at f32: 4/4"),
    ("extract 1.09x, rag 1.47x and rewrite 1.98x", "speculate-run.json",
     "chatlab-openvino-int8-pl 58.6 (1.09x) 156 73.2 (1.47x) 330 107.2 (1.98x)"),
    ("(tokens per pass 1.07, 1.40, 2.25)", "speculate-run.json",
     "chatlab-openvino-int8-pl tokens per model pass: extract 1.07, rag 1.40, rewrite 2.25"),
    ("0.60-0.72x", "speculate-run.json", "genai-int8-pl 39.7 (0.65x) 150 44.3 (0.72x) 327 82.7 (1.51x) 209 35.1 (0.60x)"),
    ("(1.49x against 1.51x genai-int8)", "speculate-run.json", "llama.cpp-q4_1 89.7 (1.49x)"),
    ("(1.49x against 1.51x genai-int8)", "speculate-run.json", "chatlab-openvino-int4-pl 88.9 (1.51x) 130 87.5 (1.46x)"),
    ("(1.73x against 1.46x)", "speculate-run.json", "90.1 (1.73x) 719 81.0 (1.43x)"),
    ("(1.43x against 2.00x)", "speculate-run.json", "120.6 (2.00x)"),
    ("extract 0.96x / 1.22x, rag 1.26x / 1.61x, rewrite 1.86x / 2.15x", "speculate-run.json",
     "extract: 0.96x / 1.22x over 5 cases rag: 1.26x / 1.61x over 5 cases rewrite: 1.86x / 2.15x"),
    ("turn-8 TTFT with reuse 0.94x genai's chat mode", "speculate-run.json", "reuse/genai-chat 0.94x"),
    ("decodes 57.2 against the exact default's 52.2 tok/s", "accuracy.json", "exact 52.2"),
    ("decodes 57.2 against the exact default's 52.2 tok/s", "accuracy.json", "fast 57.2"),
    ("3 of 98 greedy replies", "accuracy.json", "3/98 same"),
    ("from 10/33 to 0/33, 08's key phrases from 12/24 to 6/24 and 01's facts from 20/24 to 16/24",
     "accuracy.json", "exact 52.2 (the reference) 10/33 12/24 20/24"),
    ("from 10/33 to 0/33, 08's key phrases from 12/24 to 6/24 and 01's facts from 20/24 to 16/24",
     "accuracy.json", "3/98 same 0/33 6/24 16/24"),
]


@pytest.mark.parametrize(("figure", "name", "shown"), DOCS_QUOTED, ids=[f"{d[1]}-{d[0][:24]}" for d in DOCS_QUOTED])
def test_a_figure_the_benchmarks_doc_quotes_is_in_its_stored_run(figure: str, name: str, shown: str) -> None:
    assert figure in flat(DOCS.read_text()), f"docs/benchmarks.md no longer quotes {figure!r}: update DOCS_QUOTED"
    assert flat(shown) in _stored_report(name), \
        f"data/bench/{name} no longer shows {shown!r}: update docs/benchmarks.md's prose"


def test_the_benchmarks_doc_quotes_07s_and_08s_own_scores() -> None:
    assert "| 20/33 |" in output_text(route.read("07")[19])
    assert "smollm2-135m-instruct 5/24" in output_text(route.read("08")[24])
    docs = flat(DOCS.read_text())
    assert "07's best method (20/33)" in docs and "08's RAG answers (5/24)" in docs


def test_06s_solutions_do_not_touch_the_live_server() -> None:
    cells = route.read("06")
    solutions = [c.source for c in cells if c.cell_type == "code" and c.source.startswith("#@title Solution")]
    assert len(solutions) == 3
    assert not [s for s in solutions if re.search(r"\b(server|client|httpx)\b", s)]
    assert "prints only the check's verdict" in flat(cells[19].source)


def test_05_reads_one_stored_run_in_a_third_of_the_words() -> None:
    """05 shows one machine's stored run, its table and its plot, in at most 1,200 words of prose;
    the runs of other machines are read in docs/benchmarks.md."""
    cells = route.read("05")
    words = sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")
    assert words <= 1200, f"notebook 05 has {words} words of markdown: move discussion to docs/benchmarks.md"
    code = [c for c in cells if c.cell_type == "code"]
    assert [re.findall(r'load_stored\("([^"]+)"\)', c.source) for c in code if "load_stored(" in c.source] \
        == [["full-run.json"]]
    shown = next(c for c in code if 'load_stored("full-run.json")' in c.source)
    assert "plot(full" in shown.source and any("image/png" in o.get("data", {}) for o in shown.outputs)
    assert "docs/benchmarks.md" in cells[2].source
