"""Id-level chat rendering: templates as data, a safe Jinja path, resolution and export.

>>> res = resolve(tokenizer, model_name="chatglm3-6b")   # which template, and why
>>> r = res.render(messages, tools=None, add_generation_prompt=True)
>>> r.ids, r.text, r.tokens, r.slots, r.stop_words, r.stop_ids
>>> render_ids(tokenizer, messages, model_name="chatglm3-6b")   # both steps in one call
"""
from chatlab.render.compose import Resolution, as_messages
from chatlab.render.encoder import Rendered, SlotSpan
from chatlab.render.resolve import render_ids, resolve
from chatlab.render.template import TEMPLATES, Template, get_template, list_templates

__all__ = ["TEMPLATES", "Rendered", "Resolution", "SlotSpan", "Template", "as_messages", "get_template",
           "list_templates", "render_ids", "resolve"]
