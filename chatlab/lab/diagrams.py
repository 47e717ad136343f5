"""The notebooks' pictures: Mermaid diagrams drawn as SVG (which GitHub and Colab display, a
mermaid block they do not), the token inspector, and matplotlib charts built without pyplot, so no
state passes between cells."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from matplotlib.figure import Figure

from chatlab.data import data_path
from chatlab.errors import ChatlabError
from chatlab.render.encoder import Rendered

if TYPE_CHECKING:
    from IPython.display import SVG
    from matplotlib.axes import Axes

FONT, LINE, PAD, GAP_Y, GAP_X = 13, 17, 10, 24, 56
_NODE = re.compile(r'([A-Za-z_][\w]*)\s*(?:\["((?:[^"])*)"\]|\{"((?:[^"])*)"\})?')
_ARROW = re.compile(r'\s*(?:-->\|"([^"]*)"\||--\s*"([^"]*)"\s*-->|-->)\s*')


@dataclass
class Flowchart:
    labels: dict[str, str] = field(default_factory=dict)   # node id -> label (Mermaid markup)
    shapes: dict[str, str] = field(default_factory=dict)   # node id -> "box" or "decision"
    edges: list[tuple[str, str, str]] = field(default_factory=list)   # (from, to, label)


def _node(text: str, chart: Flowchart, where: str) -> str:
    m = _NODE.fullmatch(text.strip())
    if not m:
        raise ChatlabError(f"{where}: cannot read the node {text.strip()!r}; write ID[\"label\"] or ID{{\"label\"}}")
    name, box, decision = m.groups()
    if box is not None or decision is not None:
        chart.labels[name], chart.shapes[name] = (box, "box") if box is not None else (decision, "decision")
    chart.labels.setdefault(name, name)
    chart.shapes.setdefault(name, "box")
    return name


def parse(source: str, origin: str = "diagram") -> Flowchart:
    """The flowchart of a Mermaid source; a line outside the subset is an error naming it."""
    lines = [ln for ln in source.strip().splitlines() if ln.strip() and not ln.strip().startswith("%%")]
    if not lines or lines[0].split() != ["flowchart", "LR"]:
        raise ChatlabError(f"{origin}: the first line must be 'flowchart LR' (the only kind drawn here)")
    chart = Flowchart()
    for n, line in enumerate(lines[1:], 2):
        parts = _ARROW.split(line.strip())
        # split() returns node, label, label, node, ...: one edge per arrow, left to right
        nodes, labels = parts[0::3], [a or b or "" for a, b in zip(parts[1::3], parts[2::3])]
        names = [_node(t, chart, f"{origin} line {n}") for t in nodes]
        chart.edges += [(a, b, lab) for a, b, lab in zip(names, names[1:], labels)]
    return chart


def _lines(label: str) -> list[str]:
    text = label.replace("#lt;", "<").replace("#gt;", ">").replace("#quot;", '"')
    return [html.unescape(part) for part in re.split(r"<br\s*/?>", text)]


def _width(text: str) -> float:
    """Approximate rendered width: wide (CJK) characters take a full em, others ~0.6."""
    return sum(FONT * (1.0 if ord(ch) >= 0x2E80 else 0.6) for ch in text)


def _layers(chart: Flowchart) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each node's column (longest path over forward edges) and the back edges (loops)."""
    order = list(chart.labels)
    succ: dict[str, list[str]] = {v: [] for v in order}
    for a, b, _ in chart.edges:
        if a != b:
            succ[a].append(b)
    back, state = set(), {}

    def visit(v: str) -> None:   # depth-first, in the source's order: a stable choice of loops
        state[v] = "open"
        for w in succ[v]:
            if state.get(w) == "open":
                back.add((v, w))
            elif w not in state:
                visit(w)
        state[v] = "done"

    for v in order:
        if v not in state:
            visit(v)
    layer = {v: 0 for v in order}
    for _ in order:   # relax |V| times: enough for the longest path in a DAG
        for a, b, _ in chart.edges:
            if a != b and (a, b) not in back:
                layer[b] = max(layer[b], layer[a] + 1)
    return layer, back


def to_svg(chart: Flowchart) -> str:
    layer, back = _layers(chart)
    size: dict[str, tuple[float, float]] = {}
    for v, label in chart.labels.items():
        rows = _lines(label)
        bw, bh = max(_width(r) for r in rows) + 2.0 * PAD, len(rows) * LINE + 2.0 * PAD
        size[v] = (bw * 1.35, bh * 1.5) if chart.shapes[v] == "decision" else (bw, bh)
    columns: dict[int, list[str]] = {}
    for v in chart.labels:
        columns.setdefault(layer[v], []).append(v)
    label_w = {k: 0.0 for k in columns}
    for a, b, lab in chart.edges:
        if lab and (a, b) not in back and a != b:
            label_w[layer[a]] = max(label_w[layer[a]], max(_width(r) for r in _lines(lab)) + 16)
    x, pos = 10.0, {}
    heights = {k: sum(size[v][1] for v in vs) + GAP_Y * (len(vs) - 1) for k, vs in columns.items()}
    total_h = max(heights.values())
    loops = any(a == b or (a, b) in back for a, b, _ in chart.edges)
    top = 30.0 if loops else 10.0
    for k in sorted(columns):
        y = top + (total_h - heights[k]) / 2
        for v in columns[k]:
            w, h = size[v]
            pos[v] = (x, y, w, h)
            y += h + GAP_Y
        x += max(size[v][0] for v in columns[k]) + max(GAP_X, label_w[k])
    width, height = x - max(GAP_X, label_w[max(columns)]) + 20, top + total_h + (50 if loops else 10)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans, Arial, Helvetica, sans-serif" '
           f'font-size="{FONT}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker></defs>',
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>']
    for a, b, lab in chart.edges:
        ax, ay, aw, ah = pos[a]
        bx, by, bw, bh = pos[b]
        # a cubic curve from (x1, y1) to (x2, y2) through control points c1, c2; the label at mid
        if a == b:   # a self-loop: an arc over the node's top
            x1, y1, x2, y2 = ax + aw * 0.35, ay, ax + aw * 0.65, ay
            c1, c2, mid = (x1, ay - 28), (x2, ay - 28), ((x1 + x2) / 2, ay - 24)
        elif (a, b) in back or layer[b] <= layer[a]:   # back to an earlier column: an arc below
            x1, y1, x2, y2 = ax + aw / 2, ay + ah, bx + bw / 2, by + bh
            low = max(y1, y2) + 40
            c1, c2, mid = (x1, low), (x2, low), ((x1 + x2) / 2, low - 8)
        else:
            x1, y1, x2, y2 = ax + aw, ay + ah / 2, bx, by + bh / 2
            cx = (x1 + x2) / 2
            c1, c2, mid = (cx, y1), (cx, y2), (cx, (y1 + y2) / 2)
        path = f"M {x1:.1f} {y1:.1f} C {c1[0]:.1f} {c1[1]:.1f} {c2[0]:.1f} {c2[1]:.1f} {x2:.1f} {y2:.1f}"
        out.append(f'<path d="{path}" fill="none" stroke="#444" stroke-width="1.3" marker-end="url(#arrow)"/>')
        if lab:
            rows = _lines(lab)
            w, h = max(_width(r) for r in rows) + 8, len(rows) * LINE + 4
            out.append(f'<rect x="{mid[0] - w / 2:.1f}" y="{mid[1] - h / 2:.1f}" width="{w:.1f}" height="{h:.1f}" '
                       'fill="white" opacity="0.9"/>')
            out += _text(rows, mid[0], mid[1], "#333", italic=True)
    for v, (x0, y0, w, h) in pos.items():
        if chart.shapes[v] == "decision":
            cx, cy = x0 + w / 2, y0 + h / 2
            out.append(f'<polygon points="{cx:.1f},{y0:.1f} {x0 + w:.1f},{cy:.1f} {cx:.1f},{y0 + h:.1f} '
                       f'{x0:.1f},{cy:.1f}" fill="#fff4dd" stroke="#b8860b" stroke-width="1.3"/>')
        else:
            out.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" rx="6" '
                       'fill="#eef3fb" stroke="#4a6fa5" stroke-width="1.3"/>')
        out += _text(_lines(chart.labels[v]), x0 + w / 2, y0 + h / 2, "#111")
    out.append("</svg>")
    return "\n".join(out)


def _text(rows: list[str], cx: float, cy: float, color: str, italic: bool = False) -> list[str]:
    first = cy - (len(rows) - 1) * LINE / 2
    style = ' font-style="italic" font-size="12"' if italic else ""
    return [f'<text x="{cx:.1f}" y="{first + i * LINE:.1f}" text-anchor="middle" dominant-baseline="middle" '
            f'fill="{color}"{style}>{html.escape(r, quote=False)}</text>' for i, r in enumerate(rows)]


def source(name: str) -> str:
    """The Mermaid source of a notebook's diagram, `data/diagrams/<name>.mmd`."""
    return data_path("diagrams", f"{name}.mmd").read_text(encoding="utf-8")


def show(name: str) -> "SVG":
    """The diagram as an IPython SVG display object (a notebook cell's last line shows it)."""
    from IPython.display import SVG

    return SVG(to_svg(parse(source(name), f"data/diagrams/{name}.mmd")))


# the token inspector's backgrounds: one per message, cycling; the template's own prefix in grey
PALETTE = ["#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#f1f5f9"]
PREFIX_COLOUR = "#e5e7eb"


def _visible(token: str) -> str:
    return (token.replace("\u2581", "·").replace("\u0120", "·").replace("\u010a", "↵")
            .replace(" ", "·").replace("\n", "↵"))


def to_html(rendered: Rendered, title: str = "") -> str:
    """The token inspector's HTML for `rendered`: spans by message and slot, the id on hover."""
    tokens = rendered.tokens
    specials = set(rendered.encoder.special_text) if rendered.encoder else set()
    out = ['<div style="font-family:monospace;line-height:2.1;font-size:13px">']
    if title:
        out.append(f"<div><b>{html.escape(title)}</b></div>")
    for span in rendered.slots:
        colour = PREFIX_COLOUR if span.message_index < 0 else PALETTE[span.message_index % len(PALETTE)]
        label = f"message {span.message_index}, {span.slot}" if span.message_index >= 0 else span.slot
        out.append(f'<span title="{html.escape(label)}" style="background:{colour};padding:2px 0;'
                   f'margin-right:3px;border-bottom:2px solid #94a3b8">')
        for pos in range(span.start, span.end):
            tid = rendered.ids[pos]
            border = "border:1.5px solid #dc2626;" if tid in specials else ""
            out.append(f'<span title="#{pos} id {tid} ({html.escape(label)})" style="{border}'
                       f'padding:0 2px;margin:0 1px;border-radius:3px">{html.escape(_visible(tokens[pos]))}</span>')
        out.append("</span>")
    out.append(f'<div style="color:#64748b">{len(rendered.ids)} tokens; template {html.escape(rendered.template)} '
               f"(rule {html.escape(rendered.rule)}); boxed: control ids; hover for id and slot</div></div>")
    return "".join(out)


def _chart(title: str) -> tuple[Figure, "Axes"]:
    """A fresh figure and its one axes; in IPython, figures show as PNGs (not their text repr)."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import select_figure_formats
    except ImportError:   # plain Python: the figure is saved or inspected, never displayed
        pass
    else:
        if (shell := get_ipython()) is not None:
            select_figure_formats(shell, {"png"})
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.set_title(title)
    return fig, ax


def bars(data: Mapping[str, float] | Mapping[str, Mapping[str, float]], *, title: str, xlabel: str,
         stacked: bool = False) -> Figure:
    """Horizontal bars, one row per key of `data`, in order; {row: {part: value}} draws each part
    as a bar of its own (`stacked`: end to end) named in a legend, the same parts in every row."""
    if not data:
        raise ValueError(f"bars for {title!r}: no rows to draw; pass at least one {{label: value}}")
    rows = {label: dict(v) if isinstance(v, Mapping) else {"": v} for label, v in data.items()}
    parts = list(next(iter(rows.values())))
    for label, values in rows.items():
        if list(values) != parts:
            raise ValueError(f"bars for {title!r}: row {label!r} has the parts {list(values)}, the first row "
                             f"{parts}; give every row the same parts in the same order")
    fig, ax = _chart(title)
    y = list(range(len(rows)))
    height = 0.8 if stacked else 0.8 / len(parts)
    left = [0.0] * len(rows)
    for i, part in enumerate(parts):
        widths = [values[part] for values in rows.values()]
        at = y if stacked else [k - 0.4 + height * (i + 0.5) for k in y]
        ax.barh(at, widths, height=height, left=left if stacked else None, label=part or None)
        if stacked:
            left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(y, list(rows))
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if parts != [""]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def lines(x: Sequence[float], series: Mapping[str, Sequence[float]], *, title: str, xlabel: str,
          ylabel: str) -> Figure:
    """One line per entry of `series` over the shared `x`, in a legend when there are several."""
    if not x or not series:
        raise ValueError(f"lines for {title!r}: nothing to draw (x has {len(x)} points, {len(series)} "
                         "series); pass the x values and at least one series")
    for name, ys in series.items():
        if len(ys) != len(x):
            raise ValueError(f"lines for {title!r}: series {name!r} has {len(ys)} values for {len(x)} x "
                             "values; give one value per x")
    fig, ax = _chart(title)
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker=".", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend(fontsize="small")
    return fig
