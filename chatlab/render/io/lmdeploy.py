"""LMDeploy's JSON chat-template config (`lmdeploy serve api_server --chat-template FILE.json`).
LMDeploy writes `{system}{meta_instruction}{eosys}` when the first message is not a system one,
then per message `{box}{content}{eox}`, then `{assistant}`; no tools. Null fields become ''."""
from __future__ import annotations

import json
import re

from chatlab.errors import CannotExpress, ChatlabError
from chatlab.render.io.flat import around, check_flat, json_config, stops_of, turn, without_engine_bos
from chatlab.render.template import Template

STRINGS = ("system", "meta_instruction", "eosys", "user", "eoh", "assistant", "eoa", "separator",
           "tool", "eotool")
LMDEPLOY_FIELDS = ("model_name", "model_path", *STRINGS, "capability", "stop_words")
# The names lmdeploy 0.18's model.py registers: a config naming one runs that class, not its fields.
_OWN = "its class {} has its own messages2prompt (code, not config fields)"
_FIELDS = "its class {} fills every null field with its own default"
LMDEPLOY_BUILTINS: dict[str, str] = {
    "base": _FIELDS.format("BaseChatTemplate"), "chatglm": _OWN.format("ChatGLM2"),
    "codellama": _FIELDS.format("CodeLlama"), "cogvlm": _FIELDS.format("CogVLM"),
    "deepseek-v3.2": _OWN.format("DeepseekV32ChatTemplate"), "deepseek-v32": _OWN.format("DeepseekV32ChatTemplate"),
    "deepseek-v4": _OWN.format("DeepseekV4ChatTemplate"), "deepseek-vl": _OWN.format("DeepseekVL"),
    "deepseek-vl2": _OWN.format("DeepseekVL2"),
    "hf": "its class HFChatTemplate renders the model's own Jinja chat_template (import that instead)",
    "internvl-zh": _OWN.format("InternVLZH"), "llama2": _FIELDS.format("Llama2"),
    "llava-chatml": _FIELDS.format("ChatmlDirect"), "llava-v1": _OWN.format("Llavav1"),
    "mistral": _FIELDS.format("MistralChat"), "mixtral": _FIELDS.format("MistralChat"),
    "vicuna": _OWN.format("Vicuna"),
}
CAPABILITIES = ("completion", "infilling", "chat", "python")


def parse_lmdeploy(text: str, origin: str = "<text>") -> Template:
    """A chatlab Template from an LMDeploy JSON config; errors name the field."""
    data, unknown = json_config(text, origin, "LMDeploy chat-template",
                                "an LMDeploy chat template is a JSON object with model_name, user, eoh, ...", LMDEPLOY_FIELDS)
    if unknown:  # LMDeploy's ChatTemplateConfig(**json) refuses them too
        raise ChatlabError(f"{origin}: unknown LMDeploy field(s) {', '.join(map(repr, unknown))}; "
                           f"the fields are {', '.join(LMDEPLOY_FIELDS)}")
    name = data.get("model_name")
    if name is not None and (not isinstance(name, str) or not name):
        raise ChatlabError(f"{origin}: field 'model_name' must be a non-empty string or null "
                           f"(LMDeploy names a nameless config with a random id), not {name!r}")
    if name in LMDEPLOY_BUILTINS:
        raise ChatlabError(f"{origin}: model_name {name!r} is one of LMDeploy's built-in templates "
                           f"({LMDEPLOY_BUILTINS[name]}), so LMDeploy would not render this file's fields "
                           "as written; give the config a name of its own (e.g. 'my-chat')")
    path = data.get("model_path")
    if path is not None and not isinstance(path, str):
        raise ChatlabError(f"{origin}: field 'model_path' must be a string or null (LMDeploy's to_json "
                           f"writes null), not {type(path).__name__}")
    for key in STRINGS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ChatlabError(f"{origin}: field {key!r} must be a string (or null), not "
                               f"{type(data[key]).__name__}")
    cap = data.get("capability")
    if cap is not None and cap not in CAPABILITIES:
        raise ChatlabError(f"{origin}: field 'capability' must be one of {', '.join(CAPABILITIES)}, not {cap!r}")
    if cap not in (None, "chat"):
        raise ChatlabError(f"{origin}: capability {cap!r} is not a chat template; chatlab imports "
                           "capability 'chat' (or none)")
    words, tokens = stops_of(data, origin)
    f = {k: data.get(k) or "" for k in STRINGS}  # null and missing are BaseChatTemplate's ''
    roles = {"system": turn(f["system"], f["eosys"]), "user": turn(f["user"], f["eoh"]),
             "assistant": turn(f["assistant"], f["eoa"] + f["separator"]), "tool": turn(f["tool"], f["eotool"])}
    meta = data.get("meta_instruction")
    return Template(name or origin.rsplit(".", 1)[0], f"imported from {origin} (LMDeploy JSON)", roles,
                    default_system="" if meta is None else meta, stop_words=words, stop_tokens=tokens)


def export_lmdeploy(t: Template, drop_tools: bool = False) -> str:
    """The LMDeploy JSON config that renders like `t` (conversations ending with a user turn)."""
    target = "LMDeploy JSON"
    check_flat(t, target, drop_tools)
    prefix, _ = without_engine_bos(t.prefix)  # LMDeploy's encode adds the tokenizer's bos itself
    if prefix:
        start = "".join(p.value or p.kind for p in prefix)
        raise CannotExpress(f"template {t.name!r} starts every prompt with {start!r}, which an {target} "
                            "template cannot write (LMDeploy adds only the tokenizer's bos by itself); "
                            "export it as Jinja instead (--format jinja)", f"the prompt prefix {start!r}", target)
    seamless = [[p for p in parts if p.kind != "seam"] for parts in (t.gen_prompt(), t.header("assistant"))]
    if seamless[0] != seamless[1]:
        raise CannotExpress(f"template {t.name!r} opens the reply differently from an assistant turn's "
                            f"header, which an {target} template cannot express (it writes {{assistant}})",
                            "a reply opening other than the assistant header", target)
    if t.system_style == "turn":
        system, eosys = around(t.turn("system"), "system turn", t, target)
    else:  # "none": plain text before the first turn, no header of its own
        system, eosys = around((*t.system_merge,), "system text", t, target)
    if t.default_system is None and (system or eosys):
        raise CannotExpress(f"template {t.name!r} has no default system prompt; an LMDeploy config file "
                            "writes {system}{meta_instruction}{eosys} whenever the conversation has no "
                            "system message (a missing or null meta_instruction becomes BaseChatTemplate's "
                            "'', not None), so it would add an empty system turn. Give the template a "
                            "default system prompt (LLaMA-Factory default_system), or export as Jinja",
                            "no system turn when the chat has no system message", target)
    user, eoh = around(t.turn("user"), "user turn", t, target)
    assistant, end = around(t.turn("assistant"), "assistant turn", t, target)
    tool, eotool = around(t.turn("tool"), "tool turn", t, target)  # (a user turn, where it has no tool role)
    # eoa is the end-of-turn marker, separator what follows it ("<|im_end|>" + "\n")
    marks = list(re.finditer(r"<[^<>\s]+>", end))
    eoa = end[:marks[-1].end()] if marks else end
    # a built-in name would make LMDeploy run its own class instead of these fields
    name = f"chatlab-{t.name}" if t.name in LMDEPLOY_BUILTINS else t.name
    data = {"model_name": name, "system": system, "meta_instruction": t.default_system or "",
            "eosys": eosys, "user": user, "eoh": eoh, "assistant": assistant, "eoa": eoa,
            "separator": end[len(eoa):], "tool": tool, "eotool": eotool, "capability": "chat",
            "stop_words": t.stop_strings()}
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
