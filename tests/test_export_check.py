"""`chatlab export-template --model M`: the export is certified for its engine with M's tokenizer
before it is written; one that would render other ids is refused (exit 1) naming the first
differing token and its cause, or written with a warning under --force; without --model the
export is said to be unchecked. The templates are written for the test; where the engine's own
code is installed (LMDeploy 0.18, Ollama's Go text/template, transformers) it confirms the
difference the check names.
"""
from __future__ import annotations

import json

import pytest

from chatlab.cli import main
from chatlab.models.assets import ASSETS
from chatlab.models.convert import load_standin
from chatlab.render import resolve
from chatlab.render.io import export_template, load_template
from chatlab.lab.certify import CONVERSATIONS, certify_export
from test_engine_semantics import tok_with

# Baichuan2's layout: reserved special tokens open the user turn and the reply; no bos written
RESERVED = {"name": "reserved-roles", "format_user": [{"token": "<reserved_106>"}, "{{content}}", {"token": "<reserved_107>"}],
            "format_assistant": ["{{content}}"]}
# ChatGLM3's layout: role tokens the ChatGLM3 tokenizer keeps out of its text encoding
ROLE_IDS = {"name": "role-ids", "format_prefix": [{"token": "[gMASK]"}, {"token": "sop"}],
            "format_system": [{"token": "<|system|>"}, "\n {{content}}"],
            "format_user": [{"token": "<|user|>"}, "\n {{content}}", {"token": "<|assistant|>"}],
            "format_assistant": ["\n {{content}}"]}
PLAIN = [c for c, (_, tools) in CONVERSATIONS.items() if not tools]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def bos_folder(tmp_path_factory):
    """A tokenizer folder with the reserved tokens whose ordinary encode adds its bos."""
    folder = tmp_path_factory.mktemp("bos-tokenizer")
    tok_with("<reserved_106>", "<reserved_107>", "</s>", bos="<s>").save_pretrained(folder)
    return folder


@pytest.fixture()
def reserved(tmp_path):
    path = tmp_path / "reserved.llamafactory.json"
    path.write_text(json.dumps(RESERVED), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt, engine", [("lmdeploy", "LMDeploy"), ("ollama", "Ollama")])
def test_an_engine_that_adds_a_bos_is_refused_at_token_0(capsys, bos_folder, reserved, fmt, engine):
    code, out, err = run(capsys, "export-template", str(reserved), "--format", fmt, "--model", str(bos_folder))
    assert code == 1 and out == ""
    assert f"{engine} renders other ids than the template with {bos_folder} in 6 of 8 probe conversations" in err
    assert f"first: 'no system' at token 0: template (nothing) | {engine} '<s>' [bos: {engine} adds one the " \
           "template does not write]" in err and "--force" in err
    code, out, err = run(capsys, "export-template", str(reserved), "--format", fmt, "--model", str(bos_folder),
                         "--force")
    assert code == 0 and out == export_template(reserved, fmt) and "written anyway (--force)" in err


def test_the_bos_difference_is_the_engines_own(bos_folder, reserved):
    """LMDeploy's messages2prompt + encode, and Ollama's Go template + tokenize, put the bos
    first; the template does not: exactly what the check reports."""
    from transformers import AutoTokenizer

    from oracles import lmdeploy_oracle, ollama_oracle

    tok = AutoTokenizer.from_pretrained(bos_folder)
    cert = certify_export(tok, reserved, "lmdeploy", export_template(reserved, "lmdeploy"))
    modelfile = export_template(reserved, "ollama")
    body = modelfile.split('TEMPLATE """')[1].split('"""')[0]
    for conv in PLAIN:
        msgs = CONVERSATIONS[conv][0]
        want = resolve(tok, template=reserved).render(msgs).ids
        lmdeploy = lmdeploy_oracle.ids(tok, lmdeploy_oracle.prompt(export_template(reserved, "lmdeploy"), msgs))
        ollama = ollama_oracle.ids(tok, ollama_oracle.prompt(body, msgs))
        assert lmdeploy == ollama == [tok.bos_token_id, *want], conv
        assert cert.cells["lmdeploy"][conv].first.cause == "bos"


def test_a_tokenizer_that_splits_a_role_token_is_refused_for_jinja(capsys, tmp_path):
    """ChatGLM3's tokenizer does not turn the text `<|user|>` into its id: the Jinja export,
    rendered by transformers' apply_chat_template and encoded, differs from the template's ids."""
    path = tmp_path / "role-ids.llamafactory.json"
    path.write_text(json.dumps(ROLE_IDS), encoding="utf-8")
    code, out, err = run(capsys, "export-template", str(path), "--model", "chatglm3-6b")
    assert code == 1 and out == ""
    assert "vLLM / transformers renders other ids than the template with chatglm3-6b in 6 of 8 probe conversations" in err
    assert "first: 'no system' at token 2: template '<|user|>'" in err and "[special token split]" in err
    tok = load_standin(ASSETS["chatglm3-6b"])
    text = export_template(path, "jinja")
    for conv in PLAIN:
        msgs = CONVERSATIONS[conv][0]
        want = resolve(tok, template=path).render(msgs).ids
        engine = tok.apply_chat_template(msgs, chat_template=text, add_generation_prompt=True, tokenize=False)
        got = tok.encode(engine, add_special_tokens=False)
        assert got[:2] == want[:2] and got[2] != want[2], conv  # the role id, then the split


def test_an_export_that_renders_the_templates_ids_is_written_and_said_checked(capsys, tmp_path):
    folder = tmp_path / "tok"
    tok_with("<reserved_106>", "<reserved_107>", "</s>").save_pretrained(folder)  # adds no bos
    path = tmp_path / "reserved.llamafactory.json"
    path.write_text(json.dumps(RESERVED), encoding="utf-8")
    for fmt in ("jinja", "lmdeploy", "ollama"):
        code, out, err = run(capsys, "export-template", str(path), "--format", fmt, "--model", str(folder))
        assert code == 0 and out.rstrip("\n") == export_template(path, fmt).rstrip("\n"), fmt
        assert f"checked with {folder}: 6 id-equal, 2 not rendered of 8 probe conversations" in err


def test_without_a_tokenizer_the_export_is_unchecked(capsys):
    code, out, err = run(capsys, "export-template", "chatml", "--format", "ollama")
    assert code == 0 and out == export_template("chatml", "ollama")
    assert "the export is unchecked; pass --model M" in err


def test_tools_dropped_on_export_are_not_a_difference(capsys):
    code, out, err = run(capsys, "export-template", "smollm2", "--format", "lmdeploy", "--drop-tools",
                         "--model", "smollm2-135m-instruct")
    assert code == 0 and json.loads(out)["meta_instruction"].startswith("You are a helpful AI")
    assert "5 id-equal, 3 cannot express of 8 probe conversations" in err


def test_a_tokenizer_without_the_special_tokens_is_bad_input(capsys, reserved):
    code, out, err = run(capsys, "export-template", str(reserved), "--format", "ollama", "--model",
                         "smollm2-135m-instruct")
    assert code == 2 and out == "" and "no special token '<reserved_106>', '<reserved_107>'" in err
    loaded = load_template(reserved)
    assert loaded.notes == []  # a name of its own: no class warning
