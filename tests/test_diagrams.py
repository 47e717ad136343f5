"""The diagram drawer: the Mermaid subset it reads, the SVG it writes, and every stored source."""
from __future__ import annotations

import base64
import xml.dom.minidom
from typing import Callable

import pytest

from chatlab import data_path
from chatlab.lab.diagrams import bars, lines, parse, show, source, to_svg
from chatlab.errors import ChatlabError

SOURCE = '''flowchart LR
    A["one<br/>#lt;|user|#gt;"] --> B{"choose"}
    B -->|"yes"| C["done"]
    B -- "no" --> A
    C --> C
'''


def test_the_subset_is_read_with_labels_shapes_and_edges() -> None:
    chart = parse(SOURCE)
    assert chart.labels["A"] == "one<br/>#lt;|user|#gt;" and chart.shapes["B"] == "decision"
    assert chart.edges == [("A", "B", ""), ("B", "C", "yes"), ("B", "A", "no"), ("C", "C", "")]


def test_the_svg_holds_every_label_as_text_and_parses() -> None:
    svg = to_svg(parse(SOURCE))
    doc = xml.dom.minidom.parseString(svg)
    texts = [t.firstChild.data for t in doc.getElementsByTagName("text")]
    assert {"one", "<|user|>", "choose", "done", "yes", "no"} <= set(texts)
    assert len(doc.getElementsByTagName("path")) == 4 + 1   # four edges and the arrow head
    assert len(doc.getElementsByTagName("polygon")) == 1    # the decision


def test_a_chain_on_one_line_makes_one_edge_per_arrow() -> None:
    chart = parse('flowchart LR\n    A["a"] --> B["b"] --> C["c"]')
    assert chart.edges == [("A", "B", ""), ("B", "C", "")]


@pytest.mark.parametrize("bad, needle", [
    ("graph TD\n A --> B", "flowchart LR"),
    ('flowchart LR\n    A(("round")) --> B', "line 2"),
])
def test_outside_the_subset_is_an_error_naming_the_line(bad: str, needle: str) -> None:
    with pytest.raises(ChatlabError, match=needle.replace("(", r"\(")):
        parse(bad)


def test_every_stored_diagram_draws() -> None:
    names = sorted(p.stem for p in data_path("diagrams").glob("*.mmd"))
    assert len(names) == 9
    for name in names:
        chart = parse(source(name), name)
        svg = show(name).data
        xml.dom.minidom.parseString(svg)
        for label in chart.labels.values():   # the first line of each box is in the picture
            first = label.split("<br/>")[0].replace("#lt;", "&lt;").replace("#gt;", "&gt;")
            assert first in svg, (name, first)


def test_bars_draw_one_bar_per_row_with_the_values_given() -> None:
    fig = bars({"hit@1": 0.83, "hit@2": 0.96, "hit@5": 1.0}, title="hit@k", xlabel="share of questions")
    ax = fig.axes[0]
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.83, 0.96, 1.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["hit@1", "hit@2", "hit@5"]
    assert ax.get_xlabel() == "share of questions" and ax.get_title() == "hit@k"
    assert ax.get_legend() is None


def test_grouped_bars_draw_each_part_side_by_side() -> None:
    fig = bars({"a": {"both": 0.1, "name": 0.5}, "b": {"both": 0.6, "name": 0.9}}, title="t", xlabel="share")
    ax = fig.axes[0]
    by_part = [(c.get_label(), [p.get_width() for p in c]) for c in ax.containers]
    assert by_part == [("both", [0.1, 0.6]), ("name", [0.5, 0.9])]
    first, second = ax.containers
    assert all(p.get_x() == 0 for p in first) and first[0].get_y() < second[0].get_y()   # side by side
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["both", "name"]


def test_stacked_bars_start_each_part_where_the_last_ended() -> None:
    verdicts = {"split": {"ends": 4, "goes on": 11, "never ends": 9}, "id level": {"ends": 22, "goes on": 0, "never ends": 2}}
    ax = bars(verdicts, title="verdicts", xlabel="replies", stacked=True).axes[0]
    ends, goes_on, never = ax.containers
    assert [p.get_width() for p in goes_on] == [11, 0] and [p.get_x() for p in goes_on] == [4, 22]
    assert [p.get_x() + p.get_width() for p in never] == [24, 24]


def test_lines_draw_every_series_over_x() -> None:
    fig = lines([1, 2, 3], {"with": [0.1, 0.2, 0.3], "without": [0.1, 0.4, 0.9]},
                title="time", xlabel="tokens", ylabel="seconds")
    ax = fig.axes[0]
    assert [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()] == [
        ("with", [1, 2, 3], [0.1, 0.2, 0.3]), ("without", [1, 2, 3], [0.1, 0.4, 0.9])]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("tokens", "seconds", "time")


@pytest.mark.parametrize("draw, needle", [
    (lambda: bars({}, title="t", xlabel="x"), "no rows to draw"),
    (lambda: bars({"a": {"p": 1.0}, "b": {"q": 2.0}}, title="t", xlabel="x"), "row 'b' has the parts"),
    (lambda: lines([], {"loss": []}, title="t", xlabel="x", ylabel="y"), "nothing to draw"),
    (lambda: lines([1, 2], {}, title="t", xlabel="x", ylabel="y"), "nothing to draw"),
    (lambda: lines([1, 2, 3], {"loss": [2.0, 1.0]}, title="t", xlabel="x", ylabel="y"), "'loss' has 2 values for 3"),
])
def test_bad_chart_data_is_a_value_error_naming_it(draw: Callable[[], object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        draw()


def test_a_chart_shows_as_a_png_in_an_ipython_shell() -> None:
    """A kernel without `%matplotlib inline` shows a bare Figure as text; drawing a chart sets
    the shell to show figures as PNGs."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        fig = bars({"a": 1.0}, title="t", xlabel="x")
        data, _ = shell.display_formatter.format(fig)
        assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        InteractiveShell.clear_instance()
