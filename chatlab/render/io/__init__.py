"""Chat templates in and out of other engines' formats (Jinja, Ollama, LMDeploy, LLaMA-Factory),
each proven id-equal to chatlab's renderer, and where two templates' renders differ."""
from chatlab.render.io.diff import TemplateDiff, diff_templates
from chatlab.render.io.formats import EXPORT_TARGETS, TEMPLATE_FORMATS, detect, export_template, load_template

__all__ = ["EXPORT_TARGETS", "TEMPLATE_FORMATS", "TemplateDiff", "detect", "diff_templates", "export_template",
           "load_template"]
