"""Id-level chat rendering: templates as data, a safe Jinja path, and which template a model gets
(`resolve`, then `Resolution.render`; `render_ids` does both)."""
from chatlab.render.compose import Resolution, as_messages
from chatlab.render.encoder import Rendered, SlotSpan
from chatlab.render.resolve import render_ids, resolve
from chatlab.render.template import TEMPLATES, Template, get_template, list_templates

__all__ = ["TEMPLATES", "Rendered", "Resolution", "SlotSpan", "Template", "as_messages", "get_template",
           "list_templates", "render_ids", "resolve"]
