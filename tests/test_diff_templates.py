"""diff_templates and `chatlab diff-templates`, `render --template FILE`, `export-template --format`."""
from __future__ import annotations

import json

import pytest

from chatlab.cli import main
from chatlab.render import get_template
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.render.io import diff_templates, load_template

DATA = "data/templates/"
CHAT = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Bye"}]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def msgs(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(CHAT), encoding="utf-8")
    return str(path)


def test_diff_api_equal_and_different():
    tok = tokenizer_for(get_template("smollm2"))
    same = diff_templates(tok, CHAT, "smollm2", DATA + "Modelfile")
    assert same.equal and same.index is None and same.a.ids == same.b.ids and "same" in str(same)
    d = diff_templates(tok, CHAT, "chatml", load_template(DATA + "chatml-assistant.lmdeploy.json"))
    assert not d.equal and d.index == 1  # chatml opens with the user turn, the file with its default system
    report = str(d)
    assert report.startswith("first difference at token 1")
    assert "'user'" in report and "'system'" in report
    assert "token 1 is from message 0 / header" in report and "token 1 is from the template / header" in report
    d = diff_templates(tok, CHAT, "smollm2", "qwen2.5")  # same layout, other default system prompt
    assert d.index == 5 and str(d).count("token 5 is from the default system prompt") == 2


def test_diff_api_takes_resolutions_and_reports_a_prefix():
    from chatlab.render import resolve

    tok = tokenizer_for(get_template("chatml"))
    d = diff_templates(tok, CHAT, resolve(tok, template="chatml"), "chatml")
    assert d.equal
    longer = diff_templates(tok, CHAT + [{"role": "assistant", "content": "x"}], "chatml", "chatml")
    assert longer.equal


def test_cli_diff_exit_codes(capsys, msgs):
    code, out, _ = run(capsys, "diff-templates", "--model", "smollm2-135m-instruct", "--messages", msgs,
                       "smollm2", DATA + "chatml-assistant.llamafactory.json")
    assert code == 0 and "same" in out
    code, out, _ = run(capsys, "diff-templates", "--model", "smollm2-135m-instruct", "--messages", msgs,
                       "chatml", DATA + "Modelfile")
    assert code == 1 and out.startswith("first difference at token 1") and "token 1 is from message 0" in out
    code, _, err = run(capsys, "diff-templates", "--model", "smollm2-135m-instruct", "--messages", msgs,
                       "chatml", "nope.jinja")
    assert code == 2 and "valid choices" in err and "Traceback" not in err


def test_cli_render_with_a_template_file(capsys, msgs):
    code, out, _ = run(capsys, "render", "--model", "smollm2-135m-instruct", "--messages", msgs,
                       "--template", DATA + "Modelfile", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["rule"] == "explicit" and "You are a helpful AI assistant" in data["text"]
    code, out2, _ = run(capsys, "render", "--model", "smollm2-135m-instruct", "--messages", msgs,
                        "--template", "smollm2", "--format", "json")
    assert json.loads(out2)["ids"] == data["ids"]


def test_cli_export_formats(capsys, tmp_path):
    code, out, _ = run(capsys, "export-template", "smollm2", "--format", "lmdeploy", "--drop-tools")
    assert code == 0 and json.loads(out)["meta_instruction"].startswith("You are a helpful AI")
    code, out, _ = run(capsys, "export-template", DATA + "chatml-assistant.llamafactory.json", "--format", "ollama")
    assert code == 0 and out.startswith("# chatlab template") and 'PARAMETER stop "<|im_end|>"' in out
    code, out, _ = run(capsys, "export-template", "chatml")
    assert code == 0 and out.startswith("{#- chatlab template 'chatml'")


@pytest.mark.parametrize("argv, fragment", [
    (["render", "--model", "smollm2-135m-instruct", "--messages", "{m}", "--template", "{bad}"], "none of the template formats"),
    (["render", "--model", "smollm2-135m-instruct", "--messages", "{m}", "--template", "chatml",
      "--template-format", "jinja"], "--template-format needs a file"),
    (["render", "--model", "smollm2-135m-instruct", "--messages", "{m}", "--template", "{raises}"], "roles must alternate"),
    (["render", "--model", "smollm2-135m-instruct", "--messages", "{m}", "--template", "{go}"], "line 1: the 'with' action"),
])
def test_cli_bad_input_is_one_line(capsys, tmp_path, msgs, argv, fragment):
    files = {"{m}": msgs, "{bad}": tmp_path / "notes.txt", "{raises}": tmp_path / "strict.jinja",
             "{go}": tmp_path / "Modelfile"}
    files["{bad}"].write_text("just words")
    files["{raises}"].write_text("{{ raise_exception('roles must alternate') }}")
    files["{go}"].write_text('TEMPLATE """{{ with .System }}{{ . }}{{ end }}"""')
    code, _, err = run(capsys, *[str(files.get(a, a)) for a in argv])
    assert code == 2 and fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, fragment", [
    (["export-template", "llama3", "--format", "ollama"], "--drop-tools"),
    (["export-template", "chatml", "--format", "lmdeploy", "--drop-tools"], "no default system prompt"),
])
def test_cli_export_the_format_cannot_express_exits_3_as_certify_does(capsys, argv, fragment):
    """Not bad input (2): the template is fine and the format too small for it, which certify
    reports as "cannot express" with exit 3; export-template says it with the same code."""
    from chatlab.lab.certify import CANNOT, EXIT_CODES

    code, out, err = run(capsys, *argv)
    assert code == 3 == EXIT_CODES[CANNOT] and out == "" and fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_unknown_template_format_is_refused(capsys, msgs):
    with pytest.raises(SystemExit) as exc:
        main(["render", "--model", "smollm2-135m-instruct", "--messages", msgs, "--template", "x.j2",
              "--template-format", "toml"])
    assert exc.value.code == 2 and "invalid choice: 'toml'" in capsys.readouterr().err


def test_diff_reports_every_difference_by_cause_so_a_bos_cannot_hide_the_real_one():
    from test_engine_semantics import tok_with

    tok = tok_with("<|im_start|>", "<|im_end|>", bos="<s>")
    chat = [{"role": "user", "content": "Hello"}]
    # the Modelfile: Ollama adds <s>, and SmolLM's default system prompt; qwen2.5: neither <s> nor that text
    d = diff_templates(tok, chat, DATA + "Modelfile", "qwen2.5")
    assert not d.equal and d.index == 0
    causes = [x.cause for x in d.differences]
    assert causes[0] == "bos" and "default system prompt" in causes
    report = str(d)
    assert "[bos]" in report and "the engine's bos" in report and "the default system prompt" in report
    dsp = [x for x in d.differences if x.cause == "default system prompt"]
    assert any(x.a_owner == "the default system prompt" for x in dsp)  # the Modelfile's SYSTEM, named as such
    assert any(x.b_owner == "the default system prompt" for x in dsp)  # qwen2.5's own


def test_diff_names_a_special_token_split():
    from chatlab.render.encoder import Piece, Rendered, encode_pieces, encoder_for
    from chatlab.render.io.diff import differences
    from test_engine_semantics import tok_with

    tok = tok_with("<|user|>", "<|end|>")
    enc = encoder_for(tok)

    def rendered(pieces):
        ids, text, slots = encode_pieces(enc, pieces)
        return Rendered(ids=ids, text=text, slot_map=slots, stop_words=[], stop_ids=[], encoder=enc)

    one = rendered([Piece("text", "<|user|>", -1, "template"), Piece("content", "hi", 0, "content")])
    # "user" as client text between template "<|" and "|>": the same characters, ordinary pieces
    split = rendered([Piece("text", "<|", -1, "template"), Piece("content", "user", 0, "content"),
                      Piece("text", "|>", -1, "template"), Piece("content", "hi", 0, "content")])
    assert one.text == split.text and one.ids != split.ids
    assert [d.cause for d in differences(one, split)] == ["special token split"]


# stands for Ollama's collate (template/template.go): two consecutive user messages become one
MERGING = 'FROM x\nTEMPLATE """{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"""\n'
TWO_USERS = [{"role": "user", "content": "First question."}, {"role": "user", "content": "Second one."}]


def test_merged_consecutive_turns_is_its_own_cause():
    tok = tokenizer_for(get_template("chatml"))
    merging = load_template(MERGING, "ollama")
    d = diff_templates(tok, TWO_USERS, "chatml", merging)
    assert d.differences and {x.cause for x in d.differences} == {"merged consecutive turns"}
    x = d.differences[0]
    assert "message 0 / content" in x.b_owner and "<|im_end|>" in x.a_tokens  # Ollama: inside message 0
    # the same template on alternating turns: no difference at all
    assert diff_templates(tok, TWO_USERS[:1], "chatml", merging).equal


def test_certify_shows_ollama_merging_consecutive_user_turns():
    from chatlab.lab.certify import certify

    cert = certify(tokenizer_for(get_template("chatml")), "chatml", {"two user turns": (TWO_USERS, None)})
    cell = cert.cells["ollama"]["two user turns"]
    assert cell.verdict == "differs" and {d.cause for d in cell.diffs} == {"merged consecutive turns"}
    assert cert.cells["jinja"]["two user turns"].verdict == "id-equal"
    assert "merged consecutive turns" in cert.format()
