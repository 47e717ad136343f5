"""`certify` / `chatlab certify`: a template through every engine's semantics, one verdict."""
from __future__ import annotations

import json

from chatlab.cli import main
from chatlab.render import get_template
from chatlab.render.export import tokenizer_for
from chatlab.render.io.certify import CONVERSATIONS, certify
from test_engine_semantics import tok_with

DATA = "data/templates/"
BOS_SLOTS = {"name": "bos-chatml", "format_prefix": [{"bos_token": True}],
             "format_system": ["<|im_start|>system\n{{content}}<|im_end|>\n"],
             "format_user": ["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"],
             "format_assistant": ["{{content}}<|im_end|>\n"], "default_system": "Be kind."}


def plain_bos_tokenizer():
    """A tokenizer with a bos token that its ordinary encode does NOT add."""
    from transformers import PreTrainedTokenizerFast

    tok = tok_with("<|im_start|>", "<|im_end|>", "<s>")
    return PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, bos_token="<s>", eos_token="<|im_end|>")


def test_certify_equal_everywhere_for_a_chatml_slot_template():
    tok = tok_with("<|im_start|>", "<|im_end|>")
    cert = certify(tok, DATA + "chatml-assistant.llamafactory.json")
    assert cert.ok, cert.format()
    assert set(cert.cells) == {"jinja", "lmdeploy", "ollama"} and set(cert.cells["ollama"]) == set(CONVERSATIONS)
    assert cert.cells["lmdeploy"]["system"].verdict == "equal"
    assert cert.cells["ollama"]["tools"].verdict == "not rendered"  # the template has no tool format


def test_certify_names_the_bos_an_engine_would_not_add(tmp_path):
    path = tmp_path / "bos.llamafactory.json"
    path.write_text(json.dumps(BOS_SLOTS), encoding="utf-8")
    # the tokenizer adds its bos itself: the exports leave it to the engines, all equal
    assert certify(tok_with("<|im_start|>", "<|im_end|>", bos="<s>"), path).ok
    # it does not: LMDeploy and Ollama would send the prompt without the bos the template writes
    cert = certify(plain_bos_tokenizer(), path)
    assert not cert.ok and cert.cells["jinja"]["system"].verdict == "equal"
    cell = cert.cells["ollama"]["system"]
    assert cell.verdict == "different" and cell.diffs[0].cause == "bos" and cell.diffs[0].a_at == 0
    assert "differs at 0 (bos)" in cert.format()


def test_certify_reports_refusals_with_the_reason():
    tok = tok_with("<|im_start|>", "<|im_end|>")
    cert = certify(tok, "chatml")
    assert cert.cells["lmdeploy"]["no system"].verdict == "refused"
    assert "no default system prompt" in cert.cells["lmdeploy"]["no system"].reason
    assert "hermes tool format" in cert.cells["lmdeploy"]["tools"].reason
    # Ollama writes the hermes tools, calls and results too (test_ollama_export_tools): all equal
    assert cert.cells["ollama"]["system"].verdict == "equal"
    assert cert.cells["ollama"]["tool call + result"].verdict == "equal"
    # a tool format the Modelfile export does not write: the chat layout is certified, the tool
    # conversations refused with the reason
    cert = certify(tokenizer_for(get_template("llama3")), "llama3")
    assert cert.cells["ollama"]["system"].verdict != "refused"  # (this tokenizer adds no bos: a bos difference)
    assert cert.cells["ollama"]["tool call + result"].verdict == "refused"
    assert "only for hermes" in cert.cells["ollama"]["tool call + result"].reason


def test_cli_certify_json_and_exit_code(capsys):
    code = main(["certify", "--model", "smollm2-135m-instruct", DATA + "chatml-assistant.lmdeploy.json", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["ok"] else 1)
    assert out["cells"]["lmdeploy"]["system"]["verdict"] == "equal"  # the file is LMDeploy's own
    assert set(out["cells"]) == {"jinja", "lmdeploy", "ollama"}
