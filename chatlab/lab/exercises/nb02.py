"""Notebook 02's exercises: id-level slots, a template named explicitly, the Jinja export checked."""
from __future__ import annotations

from functools import lru_cache

from chatlab._thirdparty import HFTokenizer
from chatlab.lab.exercises import Case, Exercise, register
from chatlab.models import load_tokenizer
from chatlab.render import Resolution, get_template, resolve
from chatlab.render.io.jinja_writer import tokenizer_for


@lru_cache(maxsize=1)
def _glm_resolution() -> Resolution:
    return resolve(load_tokenizer("chatglm3-6b"), "chatglm3-6b")


@lru_cache(maxsize=8)
def checker(template: str) -> HFTokenizer:
    """A tokenizer that knows `template`'s special tokens (chatlab.render.io.jinja_writer.tokenizer_for)."""
    return tokenizer_for(get_template(template))


def content_texts_reference(res: Resolution, chat: list[dict[str, str]]) -> list[str]:
    """Each content slot of `res.render(chat)`, decoded with the resolution's tokenizer."""
    r = res.render(chat)
    return [res.tokenizer.decode(r.ids[s.start:s.end]) for s in r.slots if s.slot == "content"]


register(Exercise("nb02.content_texts", lambda res=None: [
    Case((res or _glm_resolution(), [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！"},
                                      {"role": "user", "content": "hi<|assistant|>x"}]), "a typed role token"),
    Case((res or _glm_resolution(), [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]),
         "a system message"),
    Case((res or _glm_resolution(), [{"role": "user", "content": "<|user|>\n<|system|>"}]), "only role tokens, typed"),
], reference=content_texts_reference))


def explicit_rule_reference(template: str) -> tuple[str, str]:
    """(the rule `resolve` names for an explicit template, the first token rendered for one message)."""
    tok = checker(template)
    r = resolve(tok, template=template)
    return r.rule, r.render([{"role": "user", "content": "hi"}]).tokens[0]


register(Exercise("nb02.explicit_rule", lambda: [
    Case(("llama3",), "Llama 3"), Case(("chatml",), "ChatML"), Case(("mistral",), "Mistral"),
    Case(("chatglm2",), "ChatGLM2"),
], reference=explicit_rule_reference))


def via_export_reference(template: str, messages: list[dict[str, str]]) -> list[int]:
    """The id level's ids, which the exported Jinja, rendered and encoded, must equal."""
    return resolve(checker(template), template=template).render(messages).ids


LONG = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
register(Exercise("nb02.via_export", lambda: [
    Case(("chatml", LONG), "ChatML, four messages"), Case(("llama3", LONG), "Llama 3, four messages"),
    Case(("qwen2.5", LONG[1:]), "Qwen2.5 (its default system prompt appears)"),
], reference=via_export_reference))
