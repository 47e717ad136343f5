"""The Jinja export of every built-in template, rendered by Hugging Face apply_chat_template and
encoded with special tokens, gives exactly the id-level ids.

The tokenizer for each template is SmolLM2's BPE with the template's special tokens added
(`tokenizer_for`), so every special written as text encodes to its one id. ChatGLM3 is checked
with its own SentencePiece tokenizer (the stand-in offline), because the equivalence there rests
on SentencePiece's dummy prefix ("\\n " before content == encoding role line and content apart).
Its tokenizer refuses to turn `<|user|>` text into the role id (by design, anti-injection), so the
exported text is encoded by an instance built with `encode_special_tokens=True`: the role tokens
in the template text then become their ids, exactly as a server configured for the export would.
"""
from __future__ import annotations

import pytest

from chatlab.models.assets import ASSETS
from chatlab.models.convert import load_standin
from chatlab.render import get_template, list_templates, resolve
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.render.io import export_template

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                          "metric": {"type": "boolean"}}, "required": ["city"]}}}]
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                     "arguments": {"city": "Paris", "metric": True}}}
CONVERSATIONS = {
    "single": ([{"role": "user", "content": "hi"}], None, True),
    "system-multi-turn": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
                           {"role": "assistant", "content": "Hi! How can I help?"},
                           {"role": "user", "content": "What is 2+2? 你好"}], None, True),
    "no-generation-prompt": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"},
                              {"role": "assistant", "content": "Hi"}], None, False),
    "tools": ([{"role": "user", "content": "Weather in Paris?"}], TOOLS, True),
    "tool-call-and-result": ([{"role": "user", "content": "Weather in Paris?"},
                              {"role": "assistant", "content": "", "tool_calls": [CALL]},
                              {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 18}"}], TOOLS, True),
    "tool-round-then-user": ([{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather?"},
                              {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]},
                              {"role": "tool", "tool_call_id": "c1", "content": "18 degrees"},
                              {"role": "assistant", "content": "It is 18 degrees."},
                              {"role": "user", "content": "Thanks"}], TOOLS, True),
}


def _cases(name: str) -> list[str]:
    has_tools = get_template(name).tool_format is not None
    return [k for k, (msgs, tools, _) in CONVERSATIONS.items()
            if has_tools or not (tools or any(m["role"] == "tool" for m in msgs))]


PARAMS = [(n, c) for n in list_templates() if n != "chatglm3" for c in _cases(n)]


@pytest.mark.parametrize("name, case", PARAMS)
def test_export_equals_id_level(name, case):
    msgs, tools, gen = CONVERSATIONS[case]
    tok = tokenizer_for(get_template(name))
    ids = resolve(tok, template=name).render(msgs, tools=tools, add_generation_prompt=gen).ids
    text = tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=gen, tokenize=False)
    assert tok.encode(text, add_special_tokens=False) == ids


@pytest.fixture(scope="module")
def glm_pair():
    asset = ASSETS["chatglm3-6b"]
    return load_standin(asset), load_standin(asset, encode_special_tokens=True)


@pytest.mark.parametrize("case", _cases("chatglm3"))
def test_chatglm3_export_equals_id_level(glm_pair, case):
    plain, with_specials = glm_pair
    msgs, tools, gen = CONVERSATIONS[case]
    ids = resolve(plain, "chatglm3-6b").render(msgs, tools=tools, add_generation_prompt=gen).ids
    text = with_specials.apply_chat_template(msgs, tools=tools, add_generation_prompt=gen, tokenize=False,
                                             chat_template=export_template("chatglm3"))
    assert with_specials.encode(text, add_special_tokens=False) == ids


def test_every_template_is_covered_with_tools_where_it_has_them():
    covered = {n for n, _ in PARAMS} | {"chatglm3"}
    assert covered == set(list_templates())
    assert {n for n, c in PARAMS if c == "tool-round-then-user"} == {
        n for n in list_templates() if get_template(n).tool_format and n != "chatglm3"}


def test_export_is_a_plain_jinja_file():
    text = export_template("qwen2.5")
    assert text.startswith("{#- chatlab template 'qwen2.5'") and "<tool_call>" in text
    assert "\n\n" not in text.split("#}", 1)[1][:5]
