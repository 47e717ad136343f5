"""chatlab's imports against the engines' own code: LMDeploy's messages2prompt + encode.

The oracle is LMDeploy's model.py itself (tests/oracles/lmdeploy_oracle.py), so "id-equal" means
equal to what `lmdeploy serve api_server --chat-template FILE.json` would send. Configs are our
own, in the shapes LMDeploy writes and reads (to_json's nulls and model_path, no model_name, no
meta_instruction). Skips, naming the install, where the oracle is absent.
"""
from __future__ import annotations

import json

import pytest

from chatlab.render import resolve
from chatlab.render.io import load_template
from oracles import lmdeploy_oracle
from test_engine_semantics import tok_with

CHATML = {"system": "<|im_start|>system\n", "eosys": "<|im_end|>\n", "user": "<|im_start|>user\n",
          "eoh": "<|im_end|>\n", "assistant": "<|im_start|>assistant\n", "eoa": "<|im_end|>",
          "separator": "\n", "stop_words": ["<|im_end|>"]}
TO_JSON = {"model_name": "mine", "model_path": None, **{k: None for k in (
    "system", "meta_instruction", "eosys", "user", "eoh", "assistant", "eoa", "tool", "eotool",
    "separator", "capability", "stop_words")}}  # ChatTemplateConfig('mine').to_json() shape
CONFIGS = {
    "chatml+meta": {"model_name": "c1", **CHATML, "meta_instruction": "You are helpful."},
    "no-meta_instruction": {"model_name": "c2", **CHATML},
    "null-meta+model_path": {**TO_JSON, **CHATML, "model_name": "c3"},
    "no-model_name": {**CHATML, "meta_instruction": "Hi."},
    "plain-text": {"model_name": "c4", "system": "", "meta_instruction": "Sys.", "eosys": "\n",
                   "user": "USER: ", "eoh": " ", "assistant": "ASSISTANT:", "eoa": "</s>", "separator": " "},
    "with-tool": {"model_name": "c5", **CHATML, "meta_instruction": "T.", "tool": "<|im_start|>tool\n",
                  "eotool": "<|im_end|>\n"},
}
CHATS = {
    "single": [{"role": "user", "content": "hi"}],
    "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
    "multi": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"},
              {"role": "user", "content": "2+2? 你好"}],
    "empty": [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    # a tool result as LMDeploy takes it (no tool_call_id): {tool}{content}{eotool}, so without
    # tool fields the bare content right after the assistant turn
    "tool result": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "Checking."},
                    {"role": "tool", "content": "18 degrees"}],
}


@pytest.mark.parametrize("bos", [None, "<s>"])
@pytest.mark.parametrize("config", CONFIGS)
def test_lmdeploy_import_is_id_equal_to_lmdeploy(config, bos):
    text = json.dumps(CONFIGS[config])
    tok = tok_with("<|im_start|>", "<|im_end|>", "</s>", bos=bos)
    loaded = load_template(text, "lmdeploy")
    for name, chat in CHATS.items():
        want = lmdeploy_oracle.ids(tok, lmdeploy_oracle.prompt(text, chat))
        got = resolve(tok, template=loaded).render(chat).ids
        assert got == want, (config, name, tok.decode(got), tok.decode(want))


def test_lmdeploy_config_without_meta_instruction_still_writes_the_system_turn():
    """LMDeploy's messages2prompt skips it only for meta_instruction None, which no config file
    can give: chat_template() drops null fields and BaseChatTemplate defaults it to ''."""
    text = json.dumps(CONFIGS["no-meta_instruction"])
    assert lmdeploy_oracle.prompt(text, CHATS["single"]).startswith("<|im_start|>system\n<|im_end|>\n")


def test_lmdeploy_builtin_names_are_the_ones_chatlab_refuses():
    from chatlab.render.io.lmdeploy import LMDEPLOY_BUILTINS

    assert set(lmdeploy_oracle.builtin_names()) == set(LMDEPLOY_BUILTINS)
