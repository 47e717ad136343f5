"""The class LLaMA-Factory registers a template name with, for the LLaMA-Factory importer.

In LLaMA-Factory a template is chosen by name (`--template mistral`), and the name brings its
class: `register_template(name=..., template_class=Llama2Template)`. A slot file whose name is
one of those but whose class is missing (the base Template is then assumed) or another would
render a different prompt from LLaMA-Factory's: Llama2Template puts the system text inside the
first user turn. The classes are read from LLaMA-Factory's own registry, its data/template.py
parsed (not imported: it needs torch), where the package is installed (in this environment, or
in CHATLAB_ORACLE_SITE, default ~/.cache/chatlab-oracles); else from TABLE below.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path

BASE = "Template"
# The names LLaMA-Factory 0.9.5 registers with a class other than the base Template.
_LLAMA2 = ("gemma gemma2 gemma3 gemma3n llama2 llama2_zh llava_next_mistral llava_next_video_mistral ministral "
           "ministral3 mistral paligemma paligemma_chat pixtral")
_REASONING = ("deepseekr1 ernie_vl gemma4 gemma4n glm4_5v glm4_moe glm4v glmz1 gpt_oss hy3 keye_vl kimi_vl mimo "
              "mimo_v2 mimo_vl minimax2 qwen3 qwen3_5 qwen3_6 qwen3_omni qwen3_vl seed_oss youtu")
TABLE: dict[str, str] = {**dict.fromkeys(_LLAMA2.split(), "Llama2Template"),
                         **dict.fromkeys(_REASONING.split(), "ReasoningTemplate"),
                         **dict.fromkeys(("aeva", "glm4_7"), "Glm47ReasoningTemplate")}
# LLaMA-Factory's classes as chatlab's template_class; the reasoning ones render the base
# class's prompt for chats without reasoning (their thought handling is not imported).
AS_CHATLAB = {BASE: "default", "Llama2Template": "llama2", "ReasoningTemplate": "default",
              "Glm47ReasoningTemplate": "default"}


def registry_file() -> Path | None:
    """LLaMA-Factory's data/template.py where the package is installed, or None."""
    spec = importlib.util.find_spec("llamafactory")  # finds without importing
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    roots.append(str(Path(os.environ.get("CHATLAB_ORACLE_SITE") or Path.home() / ".cache" / "chatlab-oracles")
                     / "llamafactory"))
    return next((Path(r) / "data" / "template.py" for r in roots if (Path(r) / "data" / "template.py").is_file()), None)


def read_registry(path: Path) -> dict[str, str]:
    """name -> class name of every `register_template(name=..., template_class=...)` call."""
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "register_template"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        name, cls = kw.get("name"), kw.get("template_class")
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            out[name.value] = cls.id if isinstance(cls, ast.Name) else BASE
    return out


@lru_cache(maxsize=1)
def registered() -> tuple[dict[str, str], str]:
    """(name -> class, where it was read from): LLaMA-Factory's registry, or TABLE (non-base names only)."""
    path = registry_file()
    if path is not None:
        try:
            found = read_registry(path)
        except (OSError, SyntaxError, ValueError):
            found = {}
        if found:
            return found, "read from its installed data/template.py"
    return dict(TABLE), "from chatlab's table of LLaMA-Factory 0.9.5"


def class_note(name: str, given: str | None) -> tuple[str, str | None]:
    """(the chatlab template_class to read a file with, a warning or None). `given` is the file's
    template_class (None: not given)."""
    classes, where = registered()
    lf = classes.get(name)
    if lf is None or lf not in AS_CHATLAB:  # a name of the user's own, or a class chatlab does not know
        return given or "default", None
    cls = AS_CHATLAB[lf]
    if given == cls and lf in (BASE, "Llama2Template") or given is None and lf == BASE:
        return cls, None
    said = "gives no template_class" if given is None else f"says template_class {given!r}"
    head = f"LLaMA-Factory registers template {name!r} as {lf} ({where}), and the file {said}"
    if lf not in (BASE, "Llama2Template"):
        return cls, (f"{head}: read with the base class, as {lf} renders chats without reasoning; its "
                     "reasoning handling (thought words, earlier thoughts removed) is not imported")
    what = "the system text inside the first user turn" if cls == "llama2" else "the system block before the first user turn"
    return cls, (f"{head}: read with template_class {cls!r} ({what}), as LLaMA-Factory renders it. Write "
                 f"\"template_class\": {json.dumps(cls)} to say so, or rename the template if it is not LLaMA-Factory's")
