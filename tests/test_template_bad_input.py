"""Bad template input gets a clear error naming the problem, never a traceback, in bounded time:
nesting thousands deep (Jinja, Modelfile, LMDeploy JSON), files far too big, empty templates,
runaway Go templates; and the format registry drives detection and the CLI's choices."""
from __future__ import annotations

import json
import os

import pytest

from chatlab.errors import ChatlabError
from chatlab.render.io import EXPORT_TARGETS, TEMPLATE_FORMATS, detect, load_template

DEEP = 3000


@pytest.mark.parametrize("fmt, text, fragment", [
    ("jinja", "{% if true %}" * DEEP + "x" + "{% endif %}" * DEEP, "nests"),
    ("ollama", 'FROM x\nTEMPLATE """' + "{{ if .System }}" * DEEP + "x" + "{{ end }}" * DEEP + '"""\n', "nested more than"),
    ("ollama", 'FROM x\nTEMPLATE """{{ ' + "(" * DEEP + ".System" + ")" * DEEP + ' }}"""\n', "nested more than"),
    ("lmdeploy", '{"model_name": "m", "stop_words": ' + "[" * DEEP + "]" * DEEP + "}", "nests too deeply"),
    ("llamafactory", '{"format_user": ' + "[" * DEEP + "]" * DEEP + "}", "nests too deeply"),
])
def test_deep_nesting_is_a_clear_error(fmt, text, fragment):
    with pytest.raises(ChatlabError) as err:
        load_template(text, fmt)
    assert fragment in str(err.value)


@pytest.mark.parametrize("fmt, text", [
    ("lmdeploy", '{"model_name": "m", "stop_words": ' + "[" * 150 + "]" * 150 + "}"),
    ("llamafactory", '{"format_user": ' + "[" * 150 + "]" * 150 + "}"),
])
def test_json_nested_past_the_bound_is_refused_on_every_python(fmt, text):
    # 150 levels parse on every Python (3.11's json gives up near 1,000, 3.13's not at 3,000),
    # so this checks chatlab's own bound, not the interpreter's stack
    json.loads(text)
    with pytest.raises(ChatlabError, match="nests too deeply for a .* file \\(more than 100 levels"):
        load_template(text, fmt)


def test_nesting_depth_counts_lists_and_objects_without_recursion():
    from chatlab.render.io.flat import nesting_depth

    assert [nesting_depth(v) for v in ("s", [], {"a": [1, {"b": []}]})] == [0, 1, 4]
    deep: list = []
    for _ in range(50_000):  # far past any recursion limit
        deep = [deep]
    assert nesting_depth(deep) == 50_001


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "Modelfile"
    with open(path, "wb") as f:  # 60 MB, sparse: nothing to read if the size is checked first
        f.truncate(60 * 1024 * 1024)
    with pytest.raises(ChatlabError, match="60 MB; a template file is a few KB"):
        load_template(path)
    with pytest.raises(ChatlabError, match="MB; a chat template is a few KB"):
        load_template("FROM x\n" + "#" * (9 * 1024 * 1024), "ollama")


@pytest.mark.parametrize("name, text, fragment", [
    ("empty.jinja", "", "is empty"),
    ("blank.jinja", "  \n", "is empty"),
    ("tokenizer_config.json", '{"chat_template": ""}', "is empty"),
    ("Modelfile", 'FROM x\nTEMPLATE ""\n', "the TEMPLATE is empty"),
])
def test_empty_templates_are_refused(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ChatlabError, match=fragment):
        load_template(path, "jinja" if name.endswith(".json") else None)


def test_runaway_go_template_is_bounded(monkeypatch):
    from chatlab.render import resolve
    from chatlab.render.io.jinja_writer import tokenizer_for
    from chatlab.render import get_template
    import chatlab.render.io.gotemplate as goeval

    monkeypatch.setattr(goeval, "MAX_PIECES", 500)
    body = "{{ range .Messages }}" + "{{ range $.Messages }}{{ .Content }}{{ end }}" * 3 + "{{ end }}"
    loaded = load_template(f'FROM x\nTEMPLATE """{body}"""\n', "ollama")
    chat = [{"role": "user" if k % 2 == 0 else "assistant", "content": "x"} for k in range(100)]
    with pytest.raises(ChatlabError, match="runaway"):
        resolve(tokenizer_for(get_template("chatml")), template=loaded).render(chat)


def test_the_registry_is_what_the_cli_and_detect_use(tmp_path):
    import argparse

    from chatlab.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices

    def choices(command: str, option: str) -> tuple:
        return tuple(next(a.choices for a in commands[command]._actions if option in a.option_strings))

    readable = tuple(TEMPLATE_FORMATS)
    assert choices("render", "--template-format") == choices("export-template", "--template-format") == readable
    assert choices("diff-templates", "--template-format-a") == choices("certify", "--template-format") == readable
    assert choices("export-template", "--format") == tuple(EXPORT_TARGETS)
    assert set(EXPORT_TARGETS) == {n for n, f in TEMPLATE_FORMATS.items() if f.writer}
    samples = {"a.jinja": "{{ messages }}", "Modelfile": "FROM x", "x.json": '{"model_name": "m"}',
               "y.json": '{"format_user": ["{{content}}"]}', "tokenizer_config.json": '{"chat_template": "x"}',
               "plain.txt": 'TEMPLATE """{{ .Prompt }}"""'}
    got = [detect(tmp_path / n, t) for n, t in samples.items()]
    assert got == ["jinja", "ollama", "lmdeploy", "llamafactory", "jinja", "ollama"]
