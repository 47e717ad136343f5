"""Write a built-in template as a Jinja chat_template that gives exactly the id-level ids.

This is the file to pass to `vllm serve --chat-template` or to store as tokenizer_config's
chat_template after fine-tuning with a chatlab template: rendered by Hugging Face
`apply_chat_template` and encoded with special tokens, it reproduces `Resolution.render` ids
(for content without special-token text; that difference is the injection the id-level path
prevents). Every rule of compose.py is written again here, as Jinja; tests hold the two equal.
Two conventions differ from the id level: a `BREAK` becomes one space before non-empty content
(SentencePiece's dummy prefix then splits the same way as encoding the parts apart), and
ChatGLM3 tool calls need their arguments as objects, as vLLM passes them.
"""
from __future__ import annotations

import json
from functools import lru_cache

from chatlab.render import tools_prompt as tp
from chatlab.render.builtin import get_template
from chatlab.render.template import Parts, Template


def lit(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def expr(parts: Parts, body: str = "''", meta: str = "''") -> str:
    items: list[str] = []
    for k, p in enumerate(parts):
        nxt = parts[k + 1].kind if k + 1 < len(parts) else None
        if p.kind in ("text", "special"):
            items.append(lit(p.value))
        elif p.kind in ("bos", "eos"):
            items.append(f"{p.kind}_token")
        elif p.kind == "round":
            items.append("(ns.round | string)")
        elif p.kind == "meta":
            items.append(f"({meta})")
        elif p.kind == "content" and not (k and parts[k - 1].kind == "break"):
            items.append(f"({body})")
        elif p.kind == "break" and nxt == "content":
            items.append(f"((' ' + {body}) if {body} else '')")
    return " + ".join(items) or "''"


def out(e: str) -> str:
    return "" if e == "''" else "{{- " + e + " }}"


class Exporter:
    def __init__(self, t: Template) -> None:
        self.t = t
        self.fmt = t.tool_format

    def turn(self, role: str, body: str, meta: str = "''", header: str = "true", footer: str = "true",
             merge: bool = False) -> str:
        t = self.t
        head, foot = t.header(role), t.footer(role)
        broken = bool(head) and head[-1].kind == "break"
        s = self.cond(header, out(expr(head[:-1] if broken else head, meta=meta)))
        if merge:
            s += ("{%- if ns.sys is not none %}" + out(expr(t.system_merge, "ns.sys")) +
                  "{%- set ns.sys = none %}{%- endif %}")
        s += out(f"((' ' + {body}) if {body} else '')" if broken else body)
        return s + self.cond(footer, out(expr(foot)))

    @staticmethod
    def cond(c: str, s: str) -> str:
        return s if c == "true" or not s else "{%- if " + c + " %}" + s + "{%- endif %}"

    def system(self) -> str:
        t, fmt = self.t, self.fmt
        default = "none" if t.default_system is None else lit(t.default_system)
        s = ("{%- if messages[0].role == 'system' %}{%- set sys = messages[0].content %}{%- set start = 1 %}"
             "{%- else %}{%- set sys = " + default + " %}{%- set start = 0 %}{%- endif %}")
        s += "{%- set ns.body = sys %}"
        if fmt in ("hermes", "json"):
            head, tail, sep = ((tp.HERMES_HEAD, tp.HERMES_TAIL, "'\\n' + tool | tojson") if fmt == "hermes"
                               else (tp.JSON_HEAD, "", "'\\n\\n' + tool | tojson(indent=4)"))
            s += ("{%- if tools %}{%- set ns.body = (sys + '\\n\\n' if sys is not none else '') + " + lit(head) +
                  " %}{%- for tool in tools %}{%- set ns.body = ns.body + " + sep + " %}{%- endfor %}"
                  "{%- set ns.body = ns.body + " + lit(tail) + " %}{%- endif %}")
        elif fmt == "chatglm3":
            s += ("{%- if tools %}{%- set ns.body = (sys if sys is not none else " + lit(tp.CHATGLM3_SYSTEM) +
                  ") + '\\n' + tools | map(attribute='function') | list | tojson(indent=4) %}{%- endif %}")
        if t.system_style == "turn":
            return s + "{%- if ns.body is not none %}" + self.turn("system", "ns.body") + "{%- endif %}"
        if t.system_style == "first-user":
            return s + "{%- set ns.sys = ns.body %}"
        return s + "{%- if ns.body is not none %}" + out(expr(t.system_merge, "ns.body")) + "{%- endif %}"

    def react_instruction(self) -> str:
        before, rest = tp.REACT_INSTRUCTION.split("{tools_text}")
        middle, after = rest.split("{names}")
        line = ("f.name + ': Call this tool to interact with the ' + f.name + ' API. What is the ' + f.name"
                " + ' API useful for? ' + (f.description or '') + ' Parameters: ' + "
                "((f.parameters if f.parameters is defined else {}) | tojson)")
        return ("{%- set ns.lines = '' %}{%- set ns.names = '' %}{%- for tool in tools or [] %}"
                "{%- set f = tool.function %}{%- set ns.lines = ns.lines + ('\\n\\n' if not loop.first else '') + "
                + line + " %}{%- set ns.names = ns.names + (', ' if not loop.first else '') + f.name %}"
                "{%- endfor %}{%- set instruction = " + lit(before) + " + ns.lines + " + lit(middle) +
                " + ns.names + " + lit(after) + " %}")

    def user(self) -> str:
        body = "c"
        if self.fmt == "react":
            body = "(instruction + '\\n\\nQuestion: ' + c if tools and i == ns.last_user else c)"
        return "{%- set ns.round = ns.round + 1 %}" + self.turn(
            "user", body, merge=self.t.system_style == "first-user")

    def assistant(self) -> str:
        t, fmt = self.t, self.fmt
        s = "{%- set ns.c = c %}{%- set ns.body = c %}"
        if t.think:
            s += ("{%- set ns.r = '' %}{%- if m.reasoning_content is string %}{%- set ns.r = m.reasoning_content %}"
                  "{%- elif '</think>' in c %}{%- set ns.r = c.split('</think>')[0].rstrip('\\n')"
                  ".split('<think>')[-1].lstrip('\\n') %}{%- set ns.c = c.split('</think>')[-1].lstrip('\\n') %}"
                  "{%- set ns.body = ns.c %}{%- endif %}{%- if i > ns.last_query and (loop.last or ns.r) %}"
                  "{%- set ns.body = '<think>\\n' + ns.r.strip('\\n') + '\\n</think>\\n\\n' + ns.c.lstrip('\\n') %}"
                  "{%- endif %}")
        calls = "{%- for call in m.tool_calls or [] %}{%- set f = call.function %}"
        args = "(f.arguments if f.arguments is string else f.arguments | tojson)"
        if fmt is None:
            return s + ("{%- if m.tool_calls %}{{- raise_exception('template " + t.name +
                        " has no tool-call format') }}{%- endif %}") + self.turn("assistant", "ns.body")
        if fmt == "react":
            return (s + "{%- set cont = prev == 'tool' %}{%- if m.tool_calls or cont %}{%- set ns.body = "
                    "('\\n' if cont else '') + ('' if ns.c.startswith('Thought:') else 'Thought: ') + ns.c %}"
                    "{%- endif %}" + calls + "{%- set ns.body = ns.body + '\\nAction: ' + f.name + "
                    "'\\nAction Input: ' + " + args + " %}{%- endfor %}" +
                    self.turn("assistant", "ns.body", header="not cont", footer="nxt != 'tool'"))
        if fmt == "chatglm3":
            value = ("(('True' if v else 'False') if v is boolean else ('None' if v is none else v | tojson))")
            return (s + "{%- if m.tool_calls %}{%- if ns.c %}" + self.turn("assistant", "ns.body") +
                    "{%- endif %}" + calls + "{%- if f.arguments is string %}{{- raise_exception("
                    "'this template needs tool-call arguments as JSON objects, not strings') }}{%- endif %}"
                    "{%- set ns.kw = '' %}{%- for k, v in f.arguments.items() %}{%- set ns.kw = ns.kw + "
                    "(', ' if not loop.first else '') + k + '=' + " + value + " %}{%- endfor %}" +
                    self.turn("assistant", "'```python\\ntool_call(' + ns.kw + ')\\n```'", meta="f.name") +
                    "{%- endfor %}{%- else %}" + self.turn("assistant", "ns.body") + "{%- endif %}")
        if fmt == "json":
            lead = "('; ' if not loop.first else ('\\n' if ns.c else '')) + '{\"name\": \"'"
            tail = "'\", \"parameters\": ' + " + args + " + '}'"
        else:
            lead = "('\\n' if (not loop.first or ns.c) else '') + '<tool_call>\\n{\"name\": \"'"
            tail = "'\", \"arguments\": ' + " + args + " + '}\\n</tool_call>'"
        return (s + calls + "{%- set ns.body = ns.body + " + lead + " + f.name + " + tail + " %}{%- endfor %}"
                + self.turn("assistant", "ns.body"))

    def tool(self) -> str:
        if self.fmt == "react":
            return ("{%- if prev not in ('assistant', 'tool') %}{{- raise_exception('a tool result must follow "
                    "an assistant tool call') }}{%- endif %}{{- '\\nObservation: ' + c }}{%- if not nxt %}"
                    "{{- '\\nThought:' }}{%- set ns.open = true %}{%- endif %}" +
                    self.cond("nxt and nxt not in ('tool', 'assistant')", out(expr(self.t.footer("assistant")))))
        if self.fmt == "hermes":
            return (self.cond("prev != 'tool'", out(expr(self.t.header("user")))) +
                    "{{- ('\\n' if prev == 'tool' else '') + '<tool_response>\\n' + c + '\\n</tool_response>' }}" +
                    self.cond("nxt != 'tool'", out(expr(self.t.footer("user")))))
        return self.turn("tool", "c")

    def render(self) -> str:
        t = self.t
        s = [f"{{#- chatlab template {t.name!r}: {t.description}. Exported by `chatlab export-template`. #}}",
             "{%- set ns = namespace(round=0, sys=none, open=false, last_user=-1, last_query=-1, body='', "
             "c='', r='', kw='', lines='', names='') %}",
             "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}"
             "{%- set c = m.content if m.content is string else '' %}{%- if not (c.startswith('<tool_response>')"
             " and c.endswith('</tool_response>')) %}{%- set ns.last_query = loop.index0 %}{%- endif %}"
             "{%- endif %}{%- endfor %}",
             out(expr(t.prefix)), self.system()]
        if self.fmt == "react":
            s.append(self.react_instruction())
        s.append("{%- for m in messages %}{%- set i = loop.index0 %}{%- if i >= start %}"
                 "{%- set c = m.content if m.content is string else '' %}"
                 "{%- set prev = messages[i - 1].role if i > 0 else '' %}"
                 "{%- set prev = 'tool' if prev == 'function' else prev %}"
                 "{%- set nxt = messages[i + 1].role if i + 1 < messages | length else '' %}"
                 "{%- set nxt = 'tool' if nxt == 'function' else nxt %}")
        s.append("{%- if m.role == 'user' %}" + self.user())
        s.append("{%- elif m.role == 'system' %}" + self.turn("system", "c"))
        s.append("{%- elif m.role == 'assistant' %}" + self.assistant())
        s.append("{%- else %}" + self.tool() + "{%- endif %}{%- endif %}{%- endfor %}")
        if t.system_style == "first-user":
            s.append("{%- if ns.sys is not none %}" + out(expr(t.system_merge, "ns.sys")) + "{%- endif %}")
        gen = out(expr(t.gen_prompt()))
        if t.think:
            gen += ("{%- if enable_thinking is defined and enable_thinking is false %}"
                    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}")
        s.append("{%- if add_generation_prompt and not ns.open %}" + gen + "{%- endif %}")
        return "\n".join(x for x in s if x)


def export_template(name: str) -> str:
    """The Jinja chat_template of a built-in template."""
    return Exporter(get_template(name)).render()


def tokenizer_for(template: Template, base: str | None = None):  # noqa: ANN201 - PreTrainedTokenizerFast
    """A fast tokenizer that has every special token `template` needs (SmolLM2's BPE underneath),
    with the exported chat_template: for checking exports of templates whose own tokenizer is not
    shipped offline. Its eos is the template's first stop token, its bos `<s>` when one is used."""
    return _tokenizer_for(template.name, base)


@lru_cache(maxsize=16)
def _tokenizer_for(name: str, base: str | None):  # noqa: ANN202
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    from chatlab.models import asset_path

    template = get_template(name)
    tok = Tokenizer.from_file(str(base or asset_path("smollm2-135m-instruct") / "tokenizer.json"))
    eos = next((s for s in template.stop_tokens if s != "eos"), "</s>")
    bos = "<s>" if template.uses("bos") else None
    names = [*template.special_tokens(), eos] + ([bos] if bos else [])
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in dict.fromkeys(names)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, bos_token=bos,
                                   chat_template=export_template(template.name))
