"""A LLaMA-Factory slot file whose name LLaMA-Factory registers with another class than the
file's (or none given) is read with LLaMA-Factory's class, with a warning naming it.

The names and classes come from LLaMA-Factory's registry where it is installed (the oracle
site), else from the table beside the importer; both are checked against LLaMA-Factory 0.9.5's
own TEMPLATES, and every Llama2Template name, written without template_class, renders what
LLaMA-Factory's _encode renders (tests/oracles/llamafactory_oracle.py).
"""
from __future__ import annotations

import json
import warnings

import pytest

from chatlab.cli import main
from chatlab.errors import ChatlabError
from chatlab.render import resolve
from chatlab.render.io import diff_templates, load_template
from chatlab.render.io import llamafactory as classes
from oracles import llamafactory_oracle
from test_engine_semantics import tok_with
from test_llamafactory_corpus import CHATS, as_slot_json, union_tokenizer

# Mistral's layout, written for these tests: [INST] turns, the system text folded into the first
MISTRAL = {"name": "mistral", "format_user": ["[INST] {{content}}[/INST]"],
           "format_assistant": ["{{content}}", {"eos_token": True}], "format_system": ["{{content}}\n\n"],
           "format_prefix": [{"bos_token": True}]}
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]


def load_quietly(data: dict):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_template(json.dumps(data), "llamafactory")
    return loaded, [str(w.message) for w in caught]


def oracle_classes() -> dict[str, str]:
    return {n: type(t).__name__ for n, t in llamafactory_oracle.load().TEMPLATES.items()}


def test_the_table_and_the_registry_reader_match_llamafactorys_own_templates():
    own = oracle_classes()
    assert classes.TABLE == {n: c for n, c in own.items() if c != "Template"}
    path = classes.registry_file()
    assert path is not None and classes.read_registry(path) == own


def test_a_name_registered_as_llama2template_is_read_with_that_class():
    tok = tok_with("</s>", bos="<s>")
    loaded, notes = load_quietly(MISTRAL)
    assert len(notes) == 1 and "'mistral' as Llama2Template" in notes[0] and "gives no template_class" in notes[0]
    assert loaded.notes == notes and loaded.template.system_style == "first-user"
    explicit, none = load_quietly({**MISTRAL, "template_class": "llama2"})
    assert none == []
    assert diff_templates(tok, CHAT, loaded, explicit).equal  # the system text is where Llama2Template puts it
    # a file that says otherwise is read as LLaMA-Factory runs that name, and told so
    wrong, notes = load_quietly({**MISTRAL, "template_class": "default"})
    assert "says template_class 'default'" in notes[0] and wrong.template.system_style == "first-user"
    # a name of the user's own keeps the file's class, without a word
    own, notes = load_quietly({**MISTRAL, "name": "my-inst"})
    assert notes == [] and own.template.system_style != "first-user"
    assert not diff_templates(tok, CHAT, own, explicit).equal


def test_every_llama2template_name_without_a_class_renders_as_llamafactory():
    tok = union_tokenizer()
    own = oracle_classes()
    names = sorted(n for n, c in own.items() if c == "Llama2Template")
    assert {"gemma", "mistral", "ministral", "pixtral", "llava_next_mistral", "llama2", "llama2_zh"} <= set(names)
    checked = 0
    for name in names:
        data, _ = as_slot_json(llamafactory_oracle.load().TEMPLATES[name])
        del data["template_class"]
        try:
            loaded, notes = load_quietly({**data, "name": name})
        except ChatlabError:  # a slot chatlab does not import (the corpus test lists why)
            continue
        assert any("as Llama2Template" in n for n in notes), name
        for chat, msgs in CHATS.items():
            want = llamafactory_oracle.prompt_ids(name, tok, msgs)
            assert resolve(tok, template=loaded).render(msgs).ids == want, (name, chat)
        checked += 1
    assert checked >= 10


def test_a_reasoning_name_is_read_with_the_base_class_and_said_so():
    tok = union_tokenizer()
    data, cls = as_slot_json(llamafactory_oracle.load().TEMPLATES["qwen3"])
    assert cls == "ReasoningTemplate"
    del data["template_class"]
    loaded, notes = load_quietly({**data, "name": "qwen3"})
    assert "as ReasoningTemplate" in notes[0] and "reasoning handling" in notes[0]
    for chat, msgs in CHATS.items():  # chats without reasoning: the base class's prompt
        assert resolve(tok, template=loaded).render(msgs).ids == llamafactory_oracle.prompt_ids("qwen3", tok, msgs), chat


def test_without_llamafactory_installed_the_table_answers(monkeypatch):
    monkeypatch.setattr(classes, "registry_file", lambda: None)
    classes.registered.cache_clear()
    try:
        _, notes = load_quietly(MISTRAL)
        assert "as Llama2Template (from chatlab's table" in notes[0]
    finally:
        classes.registered.cache_clear()


def test_the_cli_says_the_class_once_on_stderr(capsys, tmp_path):
    path = tmp_path / "mistral.json"
    path.write_text(json.dumps({**MISTRAL, "format_user": ["[INST] {{content}} [/INST]"]}), encoding="utf-8")
    code = main(["export-template", str(path)])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("{#- chatlab template 'mistral'")
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1 and warning[0].startswith("chatlab: warning: mistral.json: LLaMA-Factory registers "
                                                       "template 'mistral' as Llama2Template")


@pytest.mark.parametrize("cls", ["Llama2Template", "qwen"])
def test_a_class_chatlab_does_not_read_is_still_refused(cls):
    with pytest.raises(ChatlabError, match="template_class"):
        load_template(json.dumps({**MISTRAL, "template_class": cls}), "llamafactory")
