"""The audit flags ChatGLM3's template-string path and transformers 5.5.4's GGUF tokenizer,
and passes the default model as the store builds it."""
from __future__ import annotations

import pytest

from chatlab.models import load_tokenizer
from chatlab.lab.audit import audit
from chatlab.models import generation_config_of, load_gguf_tokenizer


def test_store_smollm2_is_clean(smollm2_tokenizer):
    report = audit(smollm2_tokenizer, "smollm2-135m-instruct",
                   generation_config=generation_config_of("smollm2-135m-instruct"))
    assert report.ok, report.format()
    assert report.first_difference is None
    assert any(f.check == "injection" and f.severity == "note" for f in report.findings)


def test_chatglm3_template_path_is_flagged():
    report = audit(load_tokenizer("chatglm3-6b"), "chatglm3-6b")
    assert not report.ok
    split = [f for f in report.findings if f.check == "split-special"]
    assert {m for f in split for m in ("<|user|>", "<|assistant|>") if m in f.message} == {"<|user|>", "<|assistant|>"}
    assert report.first_difference["position"] == 2  # [gMASK] sop agree, then the role token splits
    assert "<|user|>" in report.first_difference["id_path"][2]
    assert "result: PROBLEMS FOUND" in report.format()


@pytest.fixture(scope="module")
def gguf_tokenizer():
    return load_gguf_tokenizer("smollm2-135m-instruct")  # ~1 min: transformers converts the GGUF


def test_gguf_loaded_tokenizer_is_flagged(gguf_tokenizer, smollm2_path):
    report = audit(gguf_tokenizer, "smollm2-135m-instruct",
                   generation_config=generation_config_of("smollm2-135m-instruct"))
    checks = {f.check for f in report.findings if f.severity == "problem"}
    assert not report.ok and {"doubled-bos", "eos"} <= checks, report.format()
    assert report.to_json()["ok"] is False


def test_explicit_template_audit_on_qwen3(qwen3_tokenizer):
    report = audit(qwen3_tokenizer, "qwen3-tokenizer", template="qwen3")
    assert report.rule == "explicit" and report.ok, report.format()
