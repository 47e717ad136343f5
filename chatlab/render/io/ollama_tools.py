"""The Hermes tool format (Qwen2.5's) as Go template text for an Ollama Modelfile.

chatlab writes tools the way Qwen2.5's Jinja template does: each tool's OpenAI JSON dumped with
Python's spacing (", " and ": "), in the client's key order, every schema key kept; a call's
arguments as the client sent them. Ollama cannot hand a template any of that: it decodes the
request into Go values first (template/template.go, convertToolsForTemplate and
convertMessagesForTemplate at ollama/ollama fb30760): properties and arguments become Go maps,
which range and marshal in sorted key order; a property keeps only the keys of api.ToolProperty
(anyOf, type, items, description, enum, properties, required); its `json` func writes compact
JSON with <, > and & escaped, and `{{ .Function }}` (no String method) prints Go struct syntax.

So the Modelfile does not print Ollama's JSON: it rebuilds chatlab's text key by key, in
Python's spacing, strings through printf %q (Go's strconv.Quote, equal to json.dumps for every
printable character and \\n \\t \\r \\b \\f). The render is id-equal to chatlab's when the request is
in the layout Ollama's values can say back:
  - a tool: name, description, parameters; parameters: type, properties, required, in that order;
  - property names in sorted order, each property's keys in the order type, description, enum,
    items, and `items` one level of scalars (deeper schemas are written compactly by `json`);
  - a call's arguments: JSON with sorted keys and Python's spacing, scalar values (a nested
    object or list is written compactly), as json.dumps(args, sort_keys=True) writes them.
Outside that layout Ollama's prompt differs from chatlab's; `chatlab certify` shows where.
"""
from __future__ import annotations

from chatlab.tools.jsonstyle import CALL_ARGS, CALL_END, CALL_HEAD, RESULT_CLOSE, RESULT_OPEN, TOOLS_HEAD, TOOLS_TAIL

# A value of a Go map (an argument, an enum member, an items key): a string quoted as
# json.dumps would, anything else through Go's json (numbers, booleans, null are the same).
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
