"""What a forced call looks like in each format, as xgrammar structural tags (plain dicts).

A call is a tag: a fixed `begin` (wrapper and name), the arguments as content, a fixed `end`.
JSON formats constrain the arguments with the tool's JSON schema; ChatGLM3 writes Python
keyword arguments, so its content is a small EBNF grammar built from the schema's properties.
JSON is compact (no free whitespace): a tiny model left free can emit newlines forever.
"""
from __future__ import annotations

import json

from chatlab.errors import ChatlabError

def _schema_content(fn: dict) -> dict:
    """The arguments as compact JSON (`{"k": v, ...}`): xgrammar's schema grammar, no free
    whitespace. Free whitespace lets a tiny model spend its token budget on newlines."""
    import xgrammar as xgr

    schema = fn.get("parameters") or {"type": "object"}
    ebnf = str(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False))
    return {"type": "grammar", "grammar": ebnf}


def call_tag(fmt: str, fn: dict) -> dict:
    """The structural tag of one call to `fn` (a function definition) in format `fmt`."""
    name = fn["name"]
    if fmt == "hermes":
        return {"type": "tag", "begin": f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": ',
                "content": _schema_content(fn), "end": "}\n</tool_call>"}
    if fmt == "json":
        return {"type": "tag", "begin": f'{{"name": {json.dumps(name)}, "parameters": ',
                "content": _schema_content(fn), "end": "}"}
    if fmt == "react":   # ends like the model would; the engine's stop word `Observation:` cuts it
        return {"type": "tag", "begin": f"Action: {name}\nAction Input: ",
                "content": _schema_content(fn), "end": "\nObservation:"}
    if fmt == "chatglm3":
        return {"type": "tag", "begin": f"{name}\n```python\ntool_call(",
                "content": {"type": "grammar", "grammar": kwargs_grammar(fn.get("parameters") or {})},
                "end": ")\n```"}
    raise ChatlabError(f"constrained tool calls are not available for format {fmt!r}; "
                       "use one of hermes, json, react, chatglm3")


# Python literal values for ChatGLM3's tool_call(k=v): strings without escapes keep both the
# grammar and ast.literal_eval simple; True/False/None are Python's spellings.
LITERALS = r'''
str ::= "\"" [^"\\\r\n]* "\""
int ::= "-"? ([0-9] | [1-9] [0-9]*)
num ::= int ("." [0-9]+)?
bool ::= "True" | "False"
none ::= "None"
any ::= str | num | bool | none | list | dict
list ::= "[" (any (", " any)*)? "]"
dict ::= "{" (str ": " any (", " str ": " any)*)? "}"
'''
TYPE_RULES = {"string": "str", "integer": "int", "number": "num", "boolean": "bool", "null": "none",
              "array": "list", "object": "dict"}


def _value_rule(schema: dict) -> str:
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(repr(v)) for v in schema["enum"])
    kind = schema.get("type") if isinstance(schema, dict) else None
    return TYPE_RULES.get(kind, "any") if isinstance(kind, str) else "any"


def kwargs_grammar(schema: dict) -> str:
    """EBNF for `k=v, ...`: required properties in schema order, then optional ones."""
    props = schema.get("properties") or {}
    required = [k for k in props if k in (schema.get("required") or [])]
    optional = [k for k in props if k not in required]
    rules = [f'p{i} ::= "{k}=" ({_value_rule(props[k])})' for i, k in enumerate(props)]
    index = {k: i for i, k in enumerate(props)}
    if required:
        root = ' ", " '.join(f"p{index[k]}" for k in required)
        root += "".join(f' (", " p{index[k]})?' for k in optional)
    elif optional:      # any subset, in order
        root = "(" + " | ".join(
            f"p{index[k]}" + "".join(f' (", " p{index[o]})?' for o in optional[j + 1:])
            for j, k in enumerate(optional)) + ")?"
    else:
        root = '""'
    return "root ::= " + root + "\n" + "\n".join(rules) + LITERALS


def forced_structure(fmt: str, fns: list[dict]) -> dict:
    """Exactly one call to one of `fns` (one fn: a named tool_choice; several: "required")."""
    tags = [call_tag(fmt, fn) for fn in fns]
    return tags[0] if len(tags) == 1 else {"type": "or", "elements": tags}


TRIGGERS = {"hermes": "<tool_call>", "react": "Action: "}


def lazy_structure(fmt: str, fns: list[dict]) -> dict | None:
    """Free text until the model starts a call, then the call is constrained (tool_choice auto)."""
    if fmt not in TRIGGERS:
        return None    # json and chatglm3 calls open the message: there is no trigger to wait for
    return {"type": "triggered_tags", "triggers": [TRIGGERS[fmt]],
            "tags": [call_tag(fmt, fn) for fn in fns]}
