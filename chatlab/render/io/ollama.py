'''Ollama Modelfiles: read one (its TEMPLATE rendered by gotemplate.py) and export a chatlab
template as one. A Hermes tool format is written as Go template text that rebuilds chatlab's tool
text key by key, id-equal in the layout the export's header states.'''
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from chatlab._thirdparty import GoValue, Jsonable
from chatlab.errors import CannotExpress, ChatlabError
from chatlab.render.encoder import Piece
from chatlab.render.io.flat import around, check_flat, flat, without_engine_bos
from chatlab.render.io.gotemplate import Evaluator, GoNode, Parser, Val
from chatlab.render.io.govalues import message
from chatlab.render.io.govalues import tools as go_tools
from chatlab.render.template import Parts, Template
from chatlab.tools.jsonstyle import CALL_ARGS, CALL_END, CALL_HEAD, RESULT_CLOSE, RESULT_OPEN, TOOLS_HEAD, TOOLS_TAIL
from chatlab.types import Message, ToolSpec

INSTRUCTIONS = ("FROM", "TEMPLATE", "SYSTEM", "PARAMETER", "ADAPTER", "LICENSE", "MESSAGE", "REQUIRES")


@dataclass
class Modelfile:
    template: str
    system: str | None = None
    stops: list[str] = field(default_factory=list)
    parameters: dict[str, list[str]] = field(default_factory=dict)
    nodes: list[GoNode] = field(default_factory=list, repr=False)
    text: str = field(default="", repr=False)  # the whole file as read: exported as a Modelfile, unchanged

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec], add_generation_prompt: bool,
               options: dict[str, Jsonable]) -> list[Piece]:
        """The pieces Ollama's template gives this chat: once over the collated .Messages, or (a
        legacy .System/.Prompt/.Response one) once per round, the last up to its first .Response."""
        if tools and not mentions(self.nodes, "Tools"):
            raise ChatlabError("this Ollama template never mentions .Tools, so Ollama refuses tools for it "
                               "(\"does not support tools\"); send the chat without tools or use a tool template",
                               param="tools")
        if not add_generation_prompt:
            raise ChatlabError("an Ollama template always decides itself how the reply opens; "
                               "add_generation_prompt=False cannot be honoured, render with a Jinja or built-in template")
        indexed = list(enumerate(messages))
        if self.system and (not messages or messages[0].role != "system"):
            indexed.insert(0, (-1, Message(role="system", content=self.system)))
        system, collated = _collate(indexed)
        ev = Evaluator({})
        think = options.get("think")
        vals: dict[str, GoValue] = {"System": "", "Prompt": "", "Response": "", "Suffix": "",
                                    "Think": bool(think), "ThinkLevel": think if isinstance(think, str) else "",
                                    "IsThinkSet": think is not None}

        def execute(tree: list[GoNode]) -> None:
            ev.root = dict(vals)
            ev.run(tree, ev.root, [{"$": ev.root}], -1)
            vals.update(System="", Prompt="", Response="")

        if mentions(self.nodes, "Messages"):
            vals.update(System=system, Messages=collated, Tools=go_tools(tools))
            execute(self.nodes)
            return ev.out
        nodes = self.nodes if mentions(self.nodes, "Response") else [*self.nodes, GoNode("out", 0, ("get", "", ["Response"]))]

        for m in collated:  # the legacy loop of Ollama's Template.Execute
            role = m["Role"]
            if role == "system" and (vals["Prompt"] or vals["Response"]) or role == "user" and vals["Response"]:
                execute(nodes)
            if role in ("system", "user", "assistant"):
                vals[{"system": "System", "user": "Prompt", "assistant": "Response"}[role]] = m["Content"]
        execute(cut_after_response(nodes)[0])
        return ev.out


def parse_modelfile(text: str, origin: str = "<text>") -> Modelfile:
    """Instructions and the parsed TEMPLATE; errors name the line."""
    values: dict[str, tuple[str, int]] = {}
    params: dict[str, list[str]] = {}
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        line, start = lines[k].strip(), k + 1
        k += 1
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word not in INSTRUCTIONS:
            raise ChatlabError(f"{origin} line {start}: unknown instruction {word!r}; a Modelfile line starts "
                               f"with one of {', '.join(INSTRUCTIONS)} (or # for a comment)")
        if word == "PARAMETER":
            name, _, rest = rest.partition(" ")
            rest = rest.strip()
            if not name or not rest:
                raise ChatlabError(f"{origin} line {start}: PARAMETER needs a name and a value "
                                   '(e.g. PARAMETER stop "<|im_end|>")')
        if rest.startswith('"""'):  # a multi-line value runs to the next """
            body = rest[3:]
            while '"""' not in body:
                if k >= len(lines):
                    raise ChatlabError(f'{origin} line {start}: {word} opens """ that is never closed; add the closing """')
                body += "\n" + lines[k]
                k += 1
            body, _, after = body.partition('"""')
            if after.strip():
                raise ChatlabError(f'{origin} line {k}: text {after.strip()!r} after the closing """ of {word}')
            value = body
        elif rest.startswith('"') and rest.endswith('"') and len(rest) >= 2:
            value = rest[1:-1].replace('\\"', '"')
        else:
            value = rest
        if word == "PARAMETER":
            params.setdefault(name.lower(), []).append(value)
        elif word in ("TEMPLATE", "SYSTEM"):
            values[word] = (value, start)
    if "TEMPLATE" not in values:
        raise ChatlabError(f"{origin} has no TEMPLATE instruction; chatlab imports the prompt template "
                           '(add TEMPLATE """…""" or export one with chatlab export-template --format ollama)')
    source, first_line = values["TEMPLATE"]
    return Modelfile(source, values.get("SYSTEM", (None, 0))[0], params.get("stop", []), params,
                     Parser(source, first_line).parse(), text)


def _collate(msgs: list[tuple[int, Message]]) -> tuple[Val, list[dict[str, GoValue]]]:
    """Ollama's collate(): system texts joined; consecutive same-role messages merged into the
    first (contents joined by a blank line); tool results kept apart."""
    system = [(i, m.content) for i, m in msgs if m.role == "system"]
    out: list[dict[str, GoValue]] = []
    for i, m in msgs:
        if out and out[-1]["Role"] == m.role and m.role != "tool":
            prev = out[-1]["Content"]
            out[-1]["Content"] = Val(prev + "\n\n" + m.content, prev.msg, prev.slot)
        else:
            out.append(message(m, i, Val(m.content, i, "system" if i < 0 else "content")))
    joined = Val("\n\n".join(c for _, c in system), system[0][0] if system else -1,
                 "system" if system and system[0][0] < 0 else "content")
    return joined, out


def mentions(nodes: list[GoNode], name: str) -> bool:
    """Whether any action refers to the field `name` (Ollama's Vars())."""
    def in_expr(e: tuple) -> bool:
        return (e[0] == "get" and name in e[2]) or (e[0] == "call" and any(in_expr(a) for a in e[2]))
    for n in nodes:
        if n.kind in ("out", "set") and in_expr(n.value):
            return True
        if n.kind in ("if", "range") and (any(in_expr(c) or mentions(b, name) for c, b in n.branches)
                                          or mentions(n.orelse, name)):
            return True
    return False


def cut_after_response(nodes: list[GoNode]) -> tuple[list[GoNode], bool]:
    """Ollama's last legacy round: keep the template up to its first printed .Response."""
    out: list[GoNode] = []
    for n in nodes:
        if n.kind == "out" and mentions([n], "Response"):
            return [*out, n], True
        if n.kind in ("if", "range"):
            branches = []
            for cond, body in n.branches:
                body, found = cut_after_response(body)
                branches.append((cond, body))
                if found:
                    return [*out, GoNode(n.kind, n.line, n.value, branches, [], n.names)], True
            orelse, found = cut_after_response(n.orelse)
            out.append(GoNode(n.kind, n.line, n.value, branches, orelse, n.names))
            if found:
                return out, True
            continue
        out.append(n)
    return out, False


def _quote(value: str, what: str) -> str:
    if '"""' in value:
        raise CannotExpress(f'the {what} contains """, which a Modelfile cannot quote; export it as Jinja',
                            f'""" in the {what}', "Ollama Modelfile")
    return f'"""{value}"""'


def export_ollama(t: Template, drop_tools: bool = False) -> str:
    """A Modelfile whose TEMPLATE renders like `t` (FROM is a placeholder); of the tool formats
    only Hermes is written, others are refused unless `drop_tools`."""
    target = "Ollama Modelfile"
    hermes = t.tool_format is not None and t.tool_format.name == "hermes" and not drop_tools
    if t.tool_format is not None and not hermes and not drop_tools:
        raise CannotExpress(f"template {t.name!r} has the {t.tool_format.name} tool format, which chatlab writes "
                            "into an Ollama Modelfile only for hermes (Qwen2.5's <tool_call> JSON); export it as "
                            "Jinja instead (--format jinja), or the chat layout without tools (--drop-tools)",
                            f"the {t.tool_format.name} tool format", target)
    check_flat(t, target, drop_tools or hermes)
    texts: list[str] = []

    def branch(role: str, parts: Parts, extra: str = "") -> str:
        before, after = around(parts, f"{role} turn", t, target)
        texts.extend([before, after])
        return f'if eq .Role "{role}" }}}}{before}{{{{ .Content }}}}{extra}{after}'

    system = t.turn("system") if t.system_style == "turn" else t.system_merge
    if hermes:
        sys_before, sys_after = around(system, "system turn", t, target)
        user_before, user_after = around(t.turn("user"), "user turn", t, target)
        arms = [branch("system", system, '{{ if and (eq $i 0) $.Tools }}' + tool_list("\n\n") + "{{ end }}"),
                branch("user", t.turn("user")), branch("assistant", t.turn("assistant"), calls()),
                'if eq .Role "tool" }}' + result(user_before, user_after)]
        loop = ('{{ $prev := "" }}{{ range $i, $m := .Messages }}{{ if and (eq $i 0) $.Tools (ne .Role "system") }}'
                + sys_before + tool_list("") + sys_after + "{{ end }}{{ " + "{{ else ".join(arms)
                + '{{ end }}{{ $prev = .Role }}{{ end }}')
    else:
        arms = [branch("system", system), branch("user", t.turn("user")), branch("assistant", t.turn("assistant"))]
        if t.tool_format is None:  # its tool role's turn, or the user turn the template writes results as
            arms.append(branch("tool", t.turn("tool")))
        loop = "{{ range .Messages }}{{ " + "{{ else ".join(arms) + "{{ end }}{{ end }}"
    if t.default_system == "":
        raise CannotExpress(f"template {t.name!r} writes an empty system turn by default (LMDeploy's "
                            "meta_instruction ''), but Ollama ignores an empty SYSTEM; give it a default "
                            "system prompt or export it as Jinja", "an empty default system turn", target)
    prefix, bos = without_engine_bos(t.prefix)
    head, gen = flat(prefix, "prefix", t, target), flat(t.gen_prompt(), "reply opening", t, target)
    if any(re.search(r"\{\{|\}\}", x) for x in [head, gen, *texts]):
        raise CannotExpress(f"template {t.name!r} has '{{{{' or '}}}}' in its text, which Go templates read as "
                            "actions; export it as Jinja instead", "'{{' or '}}' in the text", target)
    body = head + loop + gen
    out = [f"# chatlab template {t.name!r}: {t.description}",
           "# Exported by `chatlab export-template --format ollama`. Point FROM at your model (a GGUF",
           "# file or an Ollama model name), then: ollama create NAME -f Modelfile",
           *([f"# {bos} is not in the TEMPLATE: Ollama's tokenizer adds the model's bos itself"] if bos else []),
           *(["# Tools, calls and results are written as chatlab writes them (hermes); Ollama's prompt is",
              "# id-equal when tools list name, description, parameters (type, properties, required) with",
              "# property names sorted, and call arguments are json.dumps(args, sort_keys=True)."] if hermes else []),
           "FROM ./model.gguf", f"TEMPLATE {_quote(body, 'template text')}"]
    if t.default_system is not None:
        out.append(f"SYSTEM {_quote(t.default_system, 'default system prompt')}")
    for stop in t.stop_strings():  # JSON quoting is Go's for plain strings; newlines need """
        quoted = _quote(stop, "stop word") if "\n" in stop else json.dumps(stop, ensure_ascii=False)
        out.append(f"PARAMETER stop {quoted}")
    return "\n".join(out) + "\n"


# A value of a Go map: a string quoted as json.dumps would, anything else through Go's json.
_SCALAR = ('{{ if eq (printf "%T" $x) "string" }}{{ printf "%q" $x }}'
           '{{ else }}{{ json $x }}{{ end }}')


def _map(expr: str) -> str:
    """`expr` (a Go map) as {"k": v, ...} in sorted key order, Python's spacing."""
    return ('{{ "{" }}{{ $s := "" }}{{ range $k, $x := ' + expr + ' }}{{ $s }}{{ printf "%q" $k }}: '
            + _SCALAR + '{{ $s = ", " }}{{ end }}}')


def _list(expr: str) -> str:
    return '[{{ range $k, $x := ' + expr + ' }}{{ if $k }}, {{ end }}' + _SCALAR + '{{ end }}]'


def _field(name: str, cond: str, value: str) -> str:
    """`, "name": value` (the separator only after an earlier field), when `cond` holds."""
    return '{{ if ' + cond + ' }}{{ $f }}"' + name + '": ' + value + '{{ $f = ", " }}{{ end }}'


_TYPE = ('{{ if eq (len $p.Type) 1 }}{{ printf "%q" (index $p.Type 0) }}{{ else }}'
         '[{{ range $k, $t := $p.Type }}{{ if $k }}, {{ end }}{{ printf "%q" $t }}{{ end }}]{{ end }}')
_PROPERTY = ('{{ "{" }}{{ $f := "" }}' + _field("type", "$p.Type", _TYPE)
             + _field("description", "$p.Description", '{{ printf "%q" $p.Description }}')
             + _field("enum", "$p.Enum", _list("$p.Enum"))
             + _field("items", "$p.Items", _map("$p.Items")) + '}')
# "properties": {} is an empty map, absent properties a nil one: only json tells them apart
_HAS_PROPS = '(ne (json $fn.Parameters.Properties) "null")'
_PARAMETERS = ('{{ "{" }}{{ $f := "" }}' + _field("type", "$fn.Parameters.Type", '{{ printf "%q" $fn.Parameters.Type }}')
               + _field("properties", _HAS_PROPS,
                        '{{ "{" }}{{ $q := "" }}{{ range $name, $p := $fn.Parameters.Properties }}{{ $q }}'
                        '{{ printf "%q" $name }}: ' + _PROPERTY + '{{ $q = ", " }}{{ end }}}')
               + _field("required", "$fn.Parameters.Required", _list("$fn.Parameters.Required")) + '}')
_TOOL = ('{"type": "function", "function": {{ "{" }}{{ $fn := .Function }}"name": {{ printf "%q" $fn.Name }}'
         '{{ if $fn.Description }}, "description": {{ printf "%q" $fn.Description }}{{ end }}'
         '{{ if or $fn.Parameters.Type ' + _HAS_PROPS + ' }}, "parameters": ' + _PARAMETERS + '{{ end }}}}')


def tool_list(lead: str) -> str:
    """The system turn's tool list after `lead` (a blank line after system text, else nothing)."""
    return (lead + TOOLS_HEAD + '{{ range $.Tools }}\n' + _TOOL + '{{ end }}' + TOOLS_TAIL)


def calls() -> str:
    """An assistant message's calls after its content (`$m` is the message)."""
    return ('{{ range $j, $c := $m.ToolCalls }}{{ if or $j $m.Content }}\n{{ end }}' + CALL_HEAD
            + '{{ $c.Function.Name }}' + CALL_ARGS + _map("$c.Function.Arguments") + CALL_END + '{{ end }}')


def result(user_before: str, user_after: str) -> str:
    """A tool result: a user turn of <tool_response> blocks, consecutive results sharing it."""
    return ('{{ $next := "" }}{{ range $k, $n := slice $.Messages $i }}{{ if eq $k 1 }}{{ $next = $n.Role }}'
            '{{ end }}{{ end }}{{ if ne $prev "tool" }}' + user_before + '{{ else }}\n{{ end }}'
            + RESULT_OPEN + '\n{{ .Content }}\n' + RESULT_CLOSE + '{{ if ne $next "tool" }}' + user_after + '{{ end }}')
