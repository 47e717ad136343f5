"""`certify` / `chatlab certify`: a template through every engine's semantics, one verdict.

Each outcome has its case here, on templates written for the test: id-equal (exit 0), differs
with the first token and its cause (1), cannot express apart from differs (3), nothing rendered
(3, never a pass), and bad input (2): a tokenizer without the template's special tokens, no
conversations, a file in no known format. Where an engine's own code is installed (the Go
oracle for Ollama, LMDeploy 0.18), the engine side of a verdict is checked against it.
"""
from __future__ import annotations

import json

import pytest

from chatlab.cli import main
from chatlab.errors import ChatlabError, MissingSpecialToken
from chatlab.render import get_template, resolve
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.lab.certify import CONVERSATIONS, certify
from test_engine_semantics import tok_with

DATA = "data/templates/"
BOS_SLOTS = {"name": "bos-chatml", "format_prefix": [{"bos_token": True}],
             "format_system": ["<|im_start|>system\n{{content}}<|im_end|>\n"],
             "format_user": ["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"],
             "format_assistant": ["{{content}}<|im_end|>\n"], "default_system": "Be kind."}
# Baichuan2's layout: a reserved special token before each user turn and before the reply
RESERVED = {"name": "reserved-roles", "format_user": [{"token": "<reserved_106>"}, "{{content}}", {"token": "<reserved_107>"}],
            "format_assistant": ["{{content}}", {"eos_token": True}]}


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
    assert cert.cells["lmdeploy"]["system"].verdict == "id-equal"
    assert cert.cells["ollama"]["tools"].verdict == "not rendered"  # the template has no tool format
    assert cert.verdict == "id-equal" and cert.exit_code == 0


def test_certify_has_a_tool_result_as_lmdeploy_writes_it():
    """The set holds a tool result with no tool_call_id, as LMDeploy takes it: an LMDeploy config
    without tool/eotool fields writes its bare content after the assistant turn, and the Jinja
    and Modelfile exports of that config write the same ids."""
    msgs, tools = CONVERSATIONS["tool result"]
    assert msgs[-1]["role"] == "tool" and "tool_call_id" not in msgs[-1] and tools is None
    tok = tok_with("<|im_start|>", "<|im_end|>")
    cert = certify(tok, DATA + "chatml-assistant.lmdeploy.json")
    assert {e: row["tool result"].verdict for e, row in cert.cells.items()} == dict.fromkeys(cert.cells, "id-equal")
    r = resolve(tok, template=DATA + "chatml-assistant.lmdeploy.json").render_request(msgs)[1]
    assert r.text.endswith("Checking.<|im_end|>\n18 degrees<|im_start|>assistant\n")


def test_certify_names_the_bos_an_engine_would_not_add(tmp_path):
    path = tmp_path / "bos.llamafactory.json"
    path.write_text(json.dumps(BOS_SLOTS), encoding="utf-8")
    # the tokenizer adds its bos itself: the exports leave it to the engines, all equal
    assert certify(tok_with("<|im_start|>", "<|im_end|>", bos="<s>"), path).ok
    # it does not: LMDeploy and Ollama would send the prompt without the bos the template writes
    cert = certify(plain_bos_tokenizer(), path)
    assert not cert.ok and cert.cells["jinja"]["system"].verdict == "id-equal"
    cell = cert.cells["ollama"]["system"]
    assert cell.verdict == "differs" and cell.first.cause == "bos" and cell.first.a_at == 0
    assert cell.first.a_tokens == ["<s>"] and cell.first.b_tokens == []
    assert cert.verdict == "differs" and cert.exit_code == 1
    assert "differs at token 0: template '<s>' | Ollama (nothing) [bos: Ollama lacks the one the template writes]" \
        in cert.format()


def test_cannot_express_is_apart_from_differs():
    tok = tok_with("<|im_start|>", "<|im_end|>")
    cert = certify(tok, "chatml")
    cell = cert.cells["lmdeploy"]["no system"]
    assert cell.verdict == "cannot express" and cell.target == "LMDeploy"
    assert cell.construct == "no system turn when the chat has no system message"
    assert "no default system prompt" in cell.reason
    assert cert.cells["lmdeploy"]["tools"].construct == "the hermes tool format"
    # Ollama writes the hermes tools, calls and results too (test_ollama_export_tools): all equal
    assert cert.cells["ollama"]["system"].verdict == "id-equal"
    assert cert.cells["ollama"]["tool call + result"].verdict == "id-equal"
    # nothing that rendered differs: not a difference (1), not a pass (0) either
    assert cert.verdict == "cannot express" and cert.exit_code == 3 and not cert.ok
    assert cert.format().startswith("certificate for 'chatml': CANNOT EXPRESS in 8 cell(s) (LMDeploy)")
    # a tool format the Modelfile export does not write: the chat layout is certified, the tool
    # conversations cannot be expressed, with the reason
    cert = certify(tokenizer_for(get_template("llama3")), "llama3")
    assert cert.cells["ollama"]["system"].verdict == "differs"  # (this tokenizer adds no bos)
    assert cert.cells["ollama"]["tool call + result"].verdict == "cannot express"
    assert "only for hermes" in cert.cells["ollama"]["tool call + result"].reason
    assert cert.exit_code == 1


OLLAMA_CHATML = '''FROM x
TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""
PARAMETER stop "<|im_end|>"
'''


def test_an_ollama_template_id_equal_where_it_renders_exits_3_not_1(tmp_path):
    """Jinja and LMDeploy cannot hold Go template code: those cells cannot be expressed; the
    Ollama cells are id-equal (and Ollama's own Go text/template agrees, where Go is installed)."""
    path = tmp_path / "Modelfile"
    path.write_text(OLLAMA_CHATML, encoding="utf-8")
    tok = tok_with("<|im_start|>", "<|im_end|>", bos="<s>")
    cert = certify(tok, path)
    plain = [c for c, (_, tools) in CONVERSATIONS.items() if not tools]
    assert {cert.cells["ollama"][c].verdict for c in plain} == {"id-equal"}
    assert cert.cells["ollama"]["tools"].verdict == "not rendered"  # it never mentions .Tools
    for engine in ("jinja", "lmdeploy"):
        assert {cert.cells[engine][c].verdict for c in plain} == {"cannot express"}
        assert cert.cells[engine]["system"].construct == "a ollama template (code, not slots)"
    assert cert.verdict == "cannot express" and cert.exit_code == 3
    from oracles import ollama_oracle

    body = OLLAMA_CHATML.split('"""')[1]
    for conv in plain:
        msgs = CONVERSATIONS[conv][0]
        want = ollama_oracle.ids(tok, ollama_oracle.prompt(body, msgs, None))
        assert resolve(tok, template=path).render(msgs).ids == want, conv


def test_nothing_rendered_is_never_a_pass():
    tok = tok_with("<|im_start|>", "<|im_end|>")
    tools_only = {c: CONVERSATIONS[c] for c in ("tools", "tool call + result")}
    cert = certify(tok, DATA + "chatml-assistant.llamafactory.json", tools_only)  # it has no tool format
    assert cert.verdict == "not rendered" and cert.exit_code == 3 and not cert.ok
    assert "NOT RENDERED" in cert.format().splitlines()[0]


def test_a_tokenizer_without_the_templates_special_tokens_is_bad_input(capsys, tmp_path):
    """The Baichuan2 layout (<reserved_106> user, <reserved_107> assistant) with a tokenizer
    that has neither: one error naming both tokens, exit 2, never "id-equal"."""
    path = tmp_path / "reserved.llamafactory.json"
    path.write_text(json.dumps(RESERVED), encoding="utf-8")
    with pytest.raises(MissingSpecialToken, match="'<reserved_106>', '<reserved_107>'"):
        certify(tok_with("<|im_end|>"), path)
    code = main(["certify", "--model", "smollm2-135m-instruct", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "no special token '<reserved_106>', '<reserved_107>'" in err and "id-equal" not in err
    # with the tokens, the same file certifies (its Jinja and Ollama exports; no default system
    # prompt, so the LMDeploy config cannot express it)
    cert = certify(tok_with("<reserved_106>", "<reserved_107>", "</s>"), path)
    assert cert.cells["jinja"]["multi-turn"].verdict == "id-equal" and cert.exit_code == 3


def test_bad_input_zero_conversations_and_unknown_format(capsys, tmp_path):
    with pytest.raises(ChatlabError, match="at least one conversation"):
        certify(tok_with("<|im_start|>", "<|im_end|>"), "chatml", {})
    notes = tmp_path / "notes.txt"
    notes.write_text("just words", encoding="utf-8")
    code = main(["certify", "--model", "smollm2-135m-instruct", str(notes)])
    assert code == 2 and "none of the template formats" in capsys.readouterr().err


def test_cli_certify_json_and_exit_code(capsys):
    code = main(["certify", "--model", "smollm2-135m-instruct", DATA + "chatml-assistant.lmdeploy.json", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == out["exit_code"] == 0 and out["verdict"] == "id-equal" and out["ok"] is True
    assert out["cells"]["lmdeploy"]["system"]["verdict"] == "id-equal"  # the file is LMDeploy's own
    assert set(out["cells"]) == set(out["engines"]) == {"jinja", "lmdeploy", "ollama"}
    assert out["cells"]["ollama"]["tools"]["verdict"] == "not rendered"
    # a difference: the first one, its position, both sides' tokens and its cause, in the JSON too
    code = main(["certify", "--model", "smollm2-135m-instruct", "--json", "--template-format", "llamafactory",
                 DATA + "chatml-assistant.llamafactory.json"])
    out = json.loads(capsys.readouterr().out)
    assert code == out["exit_code"]
    for row in out["cells"].values():
        for cell in row.values():
            assert (cell["first_difference"] is None) == (cell["verdict"] != "differs")


def test_cli_certify_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["certify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "0 at least one cell rendered" in text and "1 some cell differs" in text
    assert "3 nothing differs, but some cell cannot be expressed" in text and "2 bad input" in text


def test_export_template_help_and_readme_give_cannot_express_certifys_code(capsys):
    """One condition, one code: export-template's help and the README's command line say 3 for a
    format that cannot express the template, the code certify's help gives it."""
    from pathlib import Path

    with pytest.raises(SystemExit):
        main(["export-template", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "3 the format cannot express the template" in text and "2 bad input" in text
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("chatlab export-template NAME|FILE --format lmdeploy"))
    assert "exit 3 when the format cannot express the template" in line
