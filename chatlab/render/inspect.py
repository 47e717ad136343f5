"""A token-level inspector: every id as a coloured span, one colour per message, grouped by slot.

`to_html(rendered)` returns a self-contained HTML fragment (a notebook displays it with
`IPython.display.HTML`): each token shows its visible text (spaces and newlines made visible),
its id on hover, and its message/slot; control ids are boxed so split role tokens stand out.
"""
from __future__ import annotations

import html

from chatlab.render.ids import Rendered

PALETTE = ["#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#f1f5f9"]
PREFIX_COLOUR = "#e5e7eb"


def _visible(token: str) -> str:
    return (token.replace("\u2581", "·").replace("\u0120", "·").replace("\u010a", "↵")
            .replace(" ", "·").replace("\n", "↵"))


def to_html(rendered: Rendered, title: str = "") -> str:
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
