"""Write a built-in template as a Jinja chat_template that gives exactly the id-level ids (every
rule of compose.py again; tests hold the two equal). A `BREAK` becomes a space before non-empty
content (SentencePiece's dummy prefix then splits alike)."""
from __future__ import annotations

from functools import lru_cache

from chatlab.models import asset_path
from chatlab.render.template import Parts, Template, get_template
from chatlab.tools.format import lit


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


def cond(c: str, s: str) -> str:
    return s if c == "true" or not s else "{%- if " + c + " %}" + s + "{%- endif %}"


class Exporter:
    """The template's layout as Jinja; its tool format writes the tool parts (JinjaTurns)."""

    def __init__(self, t: Template) -> None:
        self.t = t
        self.fmt = t.tool_format

    def turn(self, role: str, body: str, meta: str = "''", header: str = "true", footer: str = "true",
             merge: bool = False) -> str:
        t = self.t
        head = t.header(role)
        broken = bool(head) and head[-1].kind == "break"
        s = cond(header, out(expr(head[:-1] if broken else head, meta=meta)))
        if merge:
            s += ("{%- if ns.sys is not none %}" + out(expr(t.system_merge, "ns.sys")) +
                  "{%- set ns.sys = none %}{%- endif %}")
        s += out(f"((' ' + {body}) if {body} else '')" if broken else body)
        return s + self.footer(role, footer)

    def header(self, role: str, when: str = "true") -> str:
        return cond(when, out(expr(self.t.header(role))))

    def footer(self, role: str, when: str = "true") -> str:
        return cond(when, out(expr(self.t.footer(role))))

    def system(self) -> str:
        t = self.t
        default = "none" if t.default_system is None else lit(t.default_system)
        s = ("{%- if messages[0].role == 'system' %}{%- set sys = messages[0].content %}{%- set start = 1 %}"
             "{%- else %}{%- set sys = " + default + " %}{%- set start = 0 %}{%- endif %}")
        if t.empty_system_default:  # LLaMA-Factory: an empty system is the default, or none
            s += "{%- if not sys %}{%- set sys = " + ("none" if not t.default_system else default) + " %}{%- endif %}"
        s += "{%- set ns.body = sys %}" + (self.fmt.jinja_system() if self.fmt else "")
        if t.system_style == "turn":
            return s + "{%- if ns.body is not none %}" + self.turn("system", "ns.body") + "{%- endif %}"
        if t.system_style == "first-user":
            return s + "{%- set ns.sys = ns.body %}"
        return s + "{%- if ns.body is not none %}" + out(expr(t.system_merge, "ns.body")) + "{%- endif %}"

    def user(self) -> str:
        body = self.fmt.jinja_user() if self.fmt else "c"
        return "{%- set ns.round = ns.round + 1 %}" + self.turn(
            "user", body, merge=self.t.system_style == "first-user")

    def assistant(self) -> str:
        t = self.t
        s = "{%- set ns.c = c %}{%- set ns.body = c %}"
        if t.think:
            s += ("{%- set ns.r = '' %}{%- if m.reasoning_content is string %}{%- set ns.r = m.reasoning_content %}"
                  "{%- elif '</think>' in c %}{%- set ns.r = c.split('</think>')[0].rstrip('\\n')"
                  ".split('<think>')[-1].lstrip('\\n') %}{%- set ns.c = c.split('</think>')[-1].lstrip('\\n') %}"
                  "{%- set ns.body = ns.c %}{%- endif %}{%- if i > ns.last_query and (loop.last or ns.r) %}"
                  "{%- set ns.body = '<think>\\n' + ns.r.strip('\\n') + '\\n</think>\\n\\n' + ns.c.lstrip('\\n') %}"
                  "{%- endif %}")
        if self.fmt is None:
            return s + ("{%- if m.tool_calls %}{{- raise_exception('template " + t.name +
                        " has no tool-call format') }}{%- endif %}") + self.turn("assistant", "ns.body")
        return s + self.fmt.jinja_assistant(self)

    def tool(self) -> str:
        return self.fmt.jinja_tool(self) if self.fmt else self.turn("tool", "c")

    def render(self) -> str:
        t, fmt = self.t, self.fmt
        query = fmt.jinja_is_query("c") if fmt else "true"
        s = [f"{{#- chatlab template {t.name!r}: {t.description}. Exported by `chatlab export-template`. #}}",
             "{%- set ns = namespace(round=0, sys=none, open=false, last_user=-1, last_query=-1, body='', "
             "c='', r='', kw='', lines='', names='') %}",
             "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}"
             "{%- set c = m.content if m.content is string else '' %}" +
             cond(query, "{%- set ns.last_query = loop.index0 %}") + "{%- endif %}{%- endfor %}",
             out(expr(t.prefix)), self.system(), fmt.jinja_prelude() if fmt else ""]
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


def tokenizer_for(template: Template):  # noqa: ANN201 - PreTrainedTokenizerFast
    """A fast tokenizer (SmolLM2's BPE) with every special token `template` needs and the exported
    chat_template: for checking exports of templates whose own tokenizer is not shipped offline."""
    return _tokenizer_for(template.name)


@lru_cache(maxsize=16)
def _tokenizer_for(name: str):  # noqa: ANN202
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    template = get_template(name)
    tok = Tokenizer.from_file(str(asset_path("smollm2-135m-instruct") / "tokenizer.json"))
    eos = next((s for s in template.stop_tokens if s != "eos"), "</s>")
    bos = "<s>" if template.uses("bos") else None
    names = [*template.special_tokens(), eos] + ([bos] if bos else [])
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in dict.fromkeys(names)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, bos_token=bos,
                                   chat_template=Exporter(template).render())
