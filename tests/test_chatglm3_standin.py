"""The ChatGLM3 stand-in: real layout, real tokenize behaviour, build_chat_input, the HF bug."""
from __future__ import annotations

import pytest

from chatlab.models import load_tokenizer
from chatlab.models.assets import ASSETS
from chatlab.models.chatglm3 import COMMAND_TOKENS, ROLE_TOKENS
from chatlab.models.convert import build, load_standin
from chatlab.render import resolve

GOLDEN_NIHAO = [64790, 64792, 64795, 30910, 13, 36474, 54591, 64796]
GOLDEN_HI = [64790, 64792, 64795, 30910, 13, 14980, 64796]
GOLDEN_BUG = [64790, 64792, 906, 31007, 4865, 31007, 30573, 5473, 31002, 31007, 530, 18971, 31007, 30994]


@pytest.fixture(scope="module")
def glm():
    return load_tokenizer("chatglm3-6b")


@pytest.fixture(scope="module")
def glm_specials():
    return load_standin(ASSETS["chatglm3-6b"], encode_special_tokens=True)


def test_says_which_tokenizer_is_in_use(glm, capsys):
    assert isinstance(glm.is_standin, bool)
    assert ("stand-in" in glm.chatlab_source) == glm.is_standin


def test_nine_specials_right_after_the_vocabulary(glm):
    n = glm.tokenizer.sp_model.vocab_size()
    ids = [glm.get_command(t) for t in COMMAND_TOKENS + ROLE_TOKENS]
    assert ids == list(range(n, n + 9))
    assert glm.eos_token_id == 2 and glm.convert_ids_to_tokens(2) == "</s>"


def test_build_chat_input_layout(glm):
    for text in ("你好", "hi"):
        ids = glm.build_chat_input(text)["input_ids"][0].tolist()
        assert ids[:3] == [glm.get_command("[gMASK]"), glm.get_command("sop"), glm.get_command("<|user|>")]
        assert ids[3:5] == glm.tokenizer.encode("\n")  # encode("\n"): the "▁" piece then byte <0x0A>
        assert glm.convert_ids_to_tokens(ids[3:5]) == ["▁", "<0x0A>"] or not glm.is_standin
        assert ids[5:-1] == glm.tokenizer.encode(text) and ids[-1] == glm.get_command("<|assistant|>")
    if not glm.is_standin:  # the real THUDM/chatglm3-6b tokenizer: reference golden ids
        assert glm.build_chat_input("你好")["input_ids"][0].tolist() == GOLDEN_NIHAO
        assert glm.build_chat_input("hi")["input_ids"][0].tolist() == GOLDEN_HI


def test_chinese_and_english_encode_into_words(glm):
    assert len(glm.tokenizer.encode("你好")) <= 2
    pieces = glm.tokenize("The weather in Beijing is sunny")
    assert not any(p.startswith("<0x") for p in pieces) and len(pieces) <= 8


def test_role_tokens_cannot_be_typed_but_prefix_tokens_can(glm, glm_specials):
    assert len(glm.tokenize("<|user|>")) >= 3  # split on purpose: no injection from text
    assert glm.encode("[gMASK]sop", add_special_tokens=False) == [glm.get_command("[gMASK]"), glm.get_command("sop")]
    assert glm_specials.encode("<|user|>", add_special_tokens=False) == [glm.get_command("<|user|>")]


def test_hf_template_path_splits_role_tokens(glm):
    text = glm.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "[gMASK]sop<|user|>\n hi<|assistant|>"
    ids = glm.encode(text, add_special_tokens=False)
    assert ids[:2] == [glm.get_command("[gMASK]"), glm.get_command("sop")]
    assert glm.get_command("<|user|>") not in ids and glm.get_command("<|assistant|>") not in ids
    if not glm.is_standin:
        assert ids == GOLDEN_BUG


def test_id_level_equals_build_chat_input_with_history_and_tools(glm):
    tools = [{"name": "get_weather", "description": "天气", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}]
    history = [{"role": "system", "content": "You are ChatGLM3.", "tools": tools},
               {"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！有什么可以帮你的吗？"}]
    expected = glm.build_chat_input("北京天气怎么样？", history=history)["input_ids"][0].tolist()
    msgs = [{"role": "system", "content": "You are ChatGLM3."}] + history[1:] + [
        {"role": "user", "content": "北京天气怎么样？"}]
    res = resolve(glm, "chatglm3-6b")
    assert res.rule == "model-renderer" and res.name == "chatglm3" and res.tool_format.name == "chatglm3"
    r = res.render(msgs, tools=[{"type": "function", "function": tools[0]}])
    assert r.ids == expected
    assert set(r.stop_ids) == {2, glm.get_command("<|user|>"), glm.get_command("<|observation|>")}


def test_standin_is_cached_and_deterministic(tmp_path, monkeypatch):
    first = (build(ASSETS["chatglm3-6b"]) / "tokenizer.model").read_bytes()
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    folder = build(ASSETS["chatglm3-6b"])
    assert folder.is_relative_to(tmp_path) and (folder / "tokenizer.model").read_bytes() == first
    mtime = (folder / "tokenizer.model").stat().st_mtime_ns
    assert build(ASSETS["chatglm3-6b"]) == folder and (folder / "tokenizer.model").stat().st_mtime_ns == mtime
