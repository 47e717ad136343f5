"""Chat templates in and out of other engines' formats, each proven id-equal to chatlab's renderer.

>>> t = load_template("Modelfile")    # or a .jinja, LMDeploy / LLaMA-Factory JSON: a Resolution
>>> resolve(tokenizer, template=t).render(messages).ids
>>> export_template("smollm2", "lmdeploy", drop_tools=True)
>>> print(diff_templates(tokenizer, messages, "chatml", t))
"""
from chatlab.render.io.diff import TemplateDiff, diff_templates
from chatlab.render.io.formats import EXPORT_TARGETS, TEMPLATE_FORMATS, detect, export_template, load_template

__all__ = ["EXPORT_TARGETS", "TEMPLATE_FORMATS", "TemplateDiff", "detect", "diff_templates", "export_template",
           "load_template"]
