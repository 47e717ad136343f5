"""What each engine does beyond the template text, modelled per engine (issue 22, priority 1).

- a special token built from template parts (`<|{{ .Role }}|>`) is one id, as in the engines,
  which tokenize the whole rendered prompt;
- the bos that Ollama and LMDeploy add themselves (their tokenizer call), never written twice
  into an export;
- LLaMA-Factory's Llama2Template puts the system text inside the first [INST]; an empty system
  message means its default_system;
- tool-call arguments reach a Jinja template as objects, the way vLLM passes them.
"""
from __future__ import annotations

import json

import pytest

from chatlab.render import get_template, resolve
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.render.io import export_template, load_template
from test_template_io import adding_bos


def tok_with(*specials: str, bos: str | None = None):
    """SmolLM2's BPE plus `specials` as special tokens (and `bos` added by ordinary encodes)."""
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    from chatlab.models import asset_path

    inner = Tokenizer.from_file(str(asset_path("smollm2-135m-instruct") / "tokenizer.json"))
    inner.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in (*specials, *([bos] if bos else []))])
    tok = PreTrainedTokenizerFast(tokenizer_object=inner, eos_token=specials[-1], bos_token=bos)
    return adding_bos(tok, bos) if bos else tok


# Stands for ollama/ollama template/phi-3.gotmpl and zephyr.gotmpl: the role token is built from
# "<|", the role name and "|>" (our own text, same construct).
ROLE_FROM_PARTS = '''FROM x
TEMPLATE """{{ range .Messages }}<|{{ .Role }}|>
{{ .Content }}<|end|>
{{ end }}<|assistant|>
"""
'''
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_special_token_built_from_template_parts_is_one_id():
    tok = tok_with("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
    r = resolve(tok, template=load_template(ROLE_FROM_PARTS, "ollama")).render(CHAT)
    want = tok.encode("<|system|>\nBe brief.<|end|>\n<|user|>\nhi<|end|>\n<|assistant|>\n", add_special_tokens=False)
    assert r.ids == want
    user = tok.convert_tokens_to_ids("<|user|>")
    assert r.ids.count(user) == 1
    span = next(s for s in r.slots if s.start <= r.ids.index(user) < s.end)
    assert span.slot == "template"  # owned by the template text that wrote it, not by content


def test_content_still_cannot_complete_a_special_token():
    # content "user" between template "<|" and "|>" stays text: only template text is matched
    tok = tok_with("<|user|>", "<|end|>")
    mf = 'FROM x\nTEMPLATE """{{ range .Messages }}<|{{ .Content }}|>{{ end }}"""\n'
    r = resolve(tok, template=load_template(mf, "ollama")).render([{"role": "user", "content": "user"}])
    assert tok.convert_tokens_to_ids("<|user|>") not in r.ids


def test_ollama_import_gets_the_engine_bos_once():
    tok = tok_with("<|im_start|>", "<|im_end|>", bos="<s>")
    loaded = load_template("data/templates/Modelfile")
    r = resolve(tok, template=loaded).render(CHAT)
    assert r.ids[0] == tok.bos_token_id and r.ids[1] != tok.bos_token_id
    assert r.ids[1:] == tok.encode(r.text[len("<s>"):], add_special_tokens=False)
    plain = tok_with("<|im_start|>", "<|im_end|>")  # a tokenizer that adds no bos: none
    assert plain.bos_token_id is None or resolve(plain, template=loaded).render(CHAT).ids[0] != plain.bos_token_id


def test_lmdeploy_import_drops_a_doubled_bos_like_lmdeploy():
    tok = tok_with("<|im_start|>", "<|im_end|>", bos="<s>")
    cfg = json.loads(open("data/templates/chatml-assistant.lmdeploy.json").read())
    once = resolve(tok, template=load_template(json.dumps(cfg), "lmdeploy")).render(CHAT).ids
    assert once[0] == tok.bos_token_id and once[1] != tok.bos_token_id
    cfg["system"] = "<s>" + cfg["system"]  # a config that writes the bos itself
    twice = resolve(tok, template=load_template(json.dumps(cfg), "lmdeploy")).render(CHAT).ids
    assert twice == once


def test_export_leaves_the_bos_to_the_engine():
    # llama3 writes <|begin_of_text|>: the Ollama export leaves it out (the engine adds it)
    text = export_template("llama3", "ollama", drop_tools=True)
    assert "<|begin_of_text|>" not in text.split("TEMPLATE", 1)[1]
    tok = adding_bos(tokenizer_for(get_template("llama3")), "<|begin_of_text|>")
    again = load_template(text, "ollama")
    for msgs in (CHAT, CHAT[1:]):
        assert resolve(tok, template=again).render(msgs).ids == resolve(tok, template="llama3").render(msgs).ids


LLAMA2_SLOTS = {"name": "llama2-lf", "template_class": "llama2",
                "format_prefix": [{"bos_token": True}],
                "format_system": ["<<SYS>>\n{{content}}\n<</SYS>>\n\n"],
                "format_user": ["[INST] {{content}} [/INST]"], "format_assistant": ["{{content}}"],
                "format_separator": [{"eos_token": True}, {"bos_token": True}],
                "default_system": "Be kind."}


def test_llamafactory_llama2_family_puts_the_system_inside_the_first_inst():
    tok = tok_with("</s>", bos="<s>")
    loaded = load_template(json.dumps(LLAMA2_SLOTS), "llamafactory")
    r = resolve(tok, template=loaded).render(CHAT)
    assert r.text == "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nhi [/INST]"
    # no system message: the default, still inside [INST]
    assert resolve(tok, template=loaded).render(CHAT[1:]).text == "<s>[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nhi [/INST]"


@pytest.mark.parametrize("default, want", [("Be kind.", "<|im_start|>system\nBe kind.<|im_end|>\n"), ("", "")])
def test_llamafactory_empty_system_means_the_default(default, want):
    slots = {"format_system": ["<|im_start|>system\n{{content}}<|im_end|>\n"],
             "format_user": ["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"],
             "format_assistant": ["{{content}}<|im_end|>\n"], "default_system": default}
    tok = tok_with("<|im_start|>", "<|im_end|>")
    loaded = load_template(json.dumps(slots), "llamafactory")
    chat = [{"role": "system", "content": ""}, {"role": "user", "content": "hi"}]
    r = resolve(tok, template=loaded).render(chat)
    assert r.text == want + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    # the Jinja export says the same
    jinja = load_template(export_template(loaded, "jinja"), "jinja")
    assert resolve(tok, template=jinja).render(chat).ids == r.ids


def test_jinja_tool_call_arguments_are_objects_as_vllm_passes_them():
    tok = tok_with("<|im_start|>", "<|im_end|>")
    # stands for Qwen2.5's chat_template: `{{ tool_call.arguments | tojson }}`
    source = ("{% for m in messages %}{% for c in m.tool_calls or [] %}<call>{{ c.function.arguments | tojson }}"
              "|{{ c.function.arguments.city }}</call>{% endfor %}{% endfor %}")
    chat = [{"role": "user", "content": "w?"}, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]}]
    r = resolve(tok, template=load_template(source, "jinja")).render(chat)
    assert r.text == '<call>{"city": "Paris"}|Paris</call>'
