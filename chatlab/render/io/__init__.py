"""Chat templates in and out of other engines' formats, each proven id-equal to chatlab's renderer.

    from chatlab.render.io import load_template, export_template, diff_templates
    t = load_template("Modelfile")                      # or a .jinja, LMDeploy / LLaMA-Factory JSON
    resolve(tokenizer, template=t).render(messages).ids   # chatlab.render.resolve
    export_template("smollm2", "lmdeploy", drop_tools=True)
    print(diff_templates(tokenizer, messages, "chatml", t))
"""
from chatlab.render.io.diff import TemplateDiff, diff_templates
from chatlab.render.io.exporting import export_template
from chatlab.render.io.loaded import load_template
from chatlab.render.io.readers import LoadedTemplate
from chatlab.render.io.registry import EXPORT_TARGETS, TEMPLATE_FORMATS, detect

__all__ = ["EXPORT_TARGETS", "TEMPLATE_FORMATS", "LoadedTemplate", "TemplateDiff", "detect", "diff_templates",
           "export_template", "load_template"]
