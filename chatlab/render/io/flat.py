"""Templates as plain strings: what the string-slot formats (LMDeploy, Ollama) can hold; what has
no string form (bos/eos, breaks, rounds, metadata, tool formats, ...) is refused, naming it."""
from __future__ import annotations

import json

from chatlab.errors import CannotExpress, ChatlabError
from chatlab.render.template import CONTENT, Parts, T, Template

NAMES = {"bos": "the tokenizer's bos token", "eos": "the tokenizer's eos token",
         "break": "an encoding break (BREAK)", "round": "a round number (ROUND)",
         "meta": "a metadata line (META)"}


def flat(parts: Parts, where: str, t: Template, target: str) -> str:
    """The parts as one string, or an error naming the part the target cannot write."""
    out: list[str] = []
    for p in parts:
        if p.kind in ("text", "special"):
            out.append(p.value)
        elif p.kind == "seam":  # these engines tokenize the whole text: no seam to write
            continue
        else:
            what = f"{NAMES.get(p.kind, p.kind)} in its {where}"
            raise CannotExpress(f"template {t.name!r} writes {what}, which an {target} template cannot "
                                "express (it has only text around the content); export it as Jinja instead "
                                "(--format jinja)", what, target)
    return "".join(out)


def around(parts: Parts, where: str, t: Template, target: str) -> tuple[str, str]:
    """(text before CONTENT, text after CONTENT) of a turn."""
    k = parts.index(CONTENT)
    return flat(parts[:k], where, t, target), flat(parts[k + 1:], where, t, target)


# The bos tokens of common tokenizers, written as a template's first part (llama3's prefix).
KNOWN_BOS = ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>")


def without_engine_bos(prefix: Parts) -> tuple[Parts, str | None]:
    """The prefix minus a leading bos, and the bos it dropped: Ollama and LMDeploy's tokenizer adds
    its own (Ollama's even when the text starts with one, so a written bos would be doubled)."""
    prefix = tuple(p for p in prefix if p.kind != "seam")
    if prefix and (prefix[0].kind == "bos" or prefix[0].kind == "special" and prefix[0].value in KNOWN_BOS):
        return prefix[1:], prefix[0].value or "the tokenizer's bos"
    return prefix, None


def turn(before: str, after: str) -> Parts:
    """Text around CONTENT (special-token text in it becomes the special id)."""
    return tuple(p for p in (T(before), CONTENT, T(after)) if p.value or p is CONTENT)


def check_flat(t: Template, target: str, drop_tools: bool) -> None:
    """Refuse what no string-slot format can hold, before any field is written."""
    fix = "export it as Jinja instead (--format jinja)"
    if t.tool_format is not None and not drop_tools:
        raise CannotExpress(f"template {t.name!r} has the {t.tool_format.name} tool format (tool definitions, "
                            f"calls and results), which an {target} template cannot express; {fix}, or "
                            "export the chat layout without tools (drop_tools=True, CLI --drop-tools)",
                            f"the {t.tool_format.name} tool format", target)
    if t.think:
        raise CannotExpress(f"template {t.name!r} drops earlier reasoning (<think>) from the history, which "
                            f"a {target} template cannot express; {fix}", "reasoning dropped from the history", target)
    if t.system_style == "first-user":
        raise CannotExpress(f"template {t.name!r} folds the system prompt into the first user turn, which a "
                            f"{target} template cannot express; {fix}", "a system prompt inside the first user turn",
                            target)
    if t.assistant_eos:
        raise CannotExpress(f"template {t.name!r} ends assistant turns with the tokenizer's eos token, which "
                            f"a {target} template cannot name; {fix}", "the eos token ending assistant turns", target)


def looks_special(word: str) -> bool:
    """`<|im_end|>`, `</s>`, `<eoa>`: a token name, not a phrase the model types."""
    return word.startswith("<") and word.endswith(">") and " " not in word and len(word) > 2


def stops_of(data: dict, origin: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(stop_words, stop_tokens) of a chatlab Template from a config's stop_words: special-looking
    ones stop on their id (when the tokenizer has one), the rest on text."""
    words = data.get("stop_words") or []
    if not isinstance(words, list) or not all(isinstance(s, str) and s for s in words):
        raise ChatlabError(f"{origin}: field 'stop_words' must be a list of non-empty strings")
    tokens = tuple(dict.fromkeys(["eos", *(w for w in words if looks_special(w))]))
    return tuple(w for w in words if not looks_special(w)), tokens


MAX_JSON_DEPTH = 100  # a real LMDeploy or LLaMA-Factory config nests three or four levels


def nesting_depth(value: object) -> int:
    """How deep lists and dicts nest in decoded JSON, counted without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, depth)
            todo.extend((x, depth + 1) for x in v)
    return deepest


def json_config(text: str, origin: str, what: str, shape: str, fields: tuple[str, ...]) -> tuple[dict, list[str]]:
    """A template config file's JSON object and its unknown keys (LMDeploy, LLaMA-Factory)."""
    too_deep = ChatlabError(f"{origin} nests too deeply for a {what} file (more than {MAX_JSON_DEPTH} "
                            "levels of lists and objects); real configs nest a few: fix the file")
    try:
        data = json.loads(text)
    except RecursionError:  # Python 3.11's json gives up near 1,000 levels
        raise too_deep from None
    except ValueError as err:
        raise ChatlabError(f"{origin} is not valid JSON ({err}); fix the {what} file") from None
    if nesting_depth(data) > MAX_JSON_DEPTH:  # 3.12+ parses thousands of levels without complaint
        raise too_deep
    if not isinstance(data, dict):
        raise ChatlabError(f"{origin}: {shape}")
    return data, [k for k in data if k not in fields]

