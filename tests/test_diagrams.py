"""The diagram drawer: the Mermaid subset it reads, the SVG it writes, and every stored source."""
from __future__ import annotations

import xml.dom.minidom

import pytest

from chatlab import data_path
from chatlab.lab.diagrams import parse, show, source, to_svg
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
