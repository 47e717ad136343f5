"""Id-level chat rendering: templates as data, a safe Jinja path, resolution, audit and export.

    from chatlab.render import resolve
    res = resolve(tokenizer, model_name="chatglm3-6b")   # which renderer, and why
    r = res.render(messages, tools=None, add_generation_prompt=True)   # chatlab.types values
    r.ids, r.text, r.tokens, r.slots, r.stop_words, r.stop_ids
    render_ids(tokenizer, messages, model_name="chatglm3-6b")   # both steps in one call
"""
from chatlab.render.builtin import TEMPLATES, get_template, list_templates
from chatlab.render.ids import Rendered, SlotSpan
from chatlab.render.resolve import Resolution, as_messages, render_ids, resolve
from chatlab.render.template import Template

__all__ = ["TEMPLATES", "Rendered", "Resolution", "SlotSpan", "Template", "as_messages", "get_template",
           "list_templates", "render_ids", "resolve"]
