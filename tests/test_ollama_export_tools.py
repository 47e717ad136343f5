"""Ollama export with tools, calls and results (hermes), against Ollama's own semantics.

Three renders of each chat: chatlab's own (the built-in template), chatlab's import of the
exported Modelfile (its Go-template evaluator), and Go's text/template running the same TEMPLATE
on the values Ollama's template.go builds (tests/oracles/ollama_go). Inside the layout the export
names (render/io/ollama.py) all three are id-equal; outside it, Ollama's prompt differs from
chatlab's, and chatlab's import still predicts Ollama's exactly (so certify shows the difference).
Skips where Go is absent.
"""
from __future__ import annotations

import pytest

from chatlab.errors import ChatlabError
from chatlab.render import get_template, resolve
from chatlab.render.io.jinja_writer import tokenizer_for
from chatlab.render.io import export_template, load_template
from chatlab.lab.certify import certify
from oracles import ollama_oracle

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather <now> & later, \"quoted\" — 天气",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "unit": {"type": "string", "description": "Unit", "enum": ["c", "f"]}},
        "required": ["city", "unit"]}}}
CLOCK = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}


def call(cid: str, args: str, name: str = "get_weather") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CHATS = {
    "tools, no system": ([{"role": "user", "content": "Weather in Paris?"}], [WEATHER, CLOCK]),
    "tools after a system": ([{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Weather?"}], [WEATHER]),
    "call + result": ([{"role": "user", "content": "Weather in Paris?"},
                       {"role": "assistant", "content": "", "tool_calls": [call("c1", '{"city": "Paris"}')]},
                       {"role": "tool", "tool_call_id": "c1", "content": "18 degrees"}], [WEATHER]),
    "two calls, two results, then text": (
        [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Paris and Rome?"},
         {"role": "assistant", "content": "Checking both.", "tool_calls": [
             call("c1", '{"city": "Paris", "days": 2, "unit": "c"}'), call("c2", '{}', "now")]},
         {"role": "tool", "tool_call_id": "c1", "content": "18"}, {"role": "tool", "tool_call_id": "c2", "content": "noon"},
         {"role": "assistant", "content": "18 degrees at noon."}, {"role": "user", "content": "Thanks 🎉"}],
        [WEATHER, CLOCK]),
    "calls without tools offered": ([{"role": "user", "content": "Again?"},
                                     {"role": "assistant", "content": "", "tool_calls": [call("c1", '{"city": "Oslo"}')]},
                                     {"role": "tool", "tool_call_id": "c1", "content": "-3"}], None),
}
# Outside the layout: arguments in the client's (unsorted) order, compact JSON, a nested value.
OUTSIDE = {
    "unsorted arguments": '{"unit": "c", "city": "Paris"}',
    "compact arguments": '{"city":"Paris"}',
    "nested argument": '{"city": "Paris", "tags": ["a", "b"]}',
}


def renders(name: str, msgs: list[dict], tools: list[dict] | None) -> tuple[list[int], list[int], list[int]]:
    t = get_template(name)
    tok = tokenizer_for(t)
    modelfile = export_template(name, "ollama")
    body = modelfile.split('TEMPLATE """', 1)[1].split('"""', 1)[0]
    own = resolve(tok, template=name).render(msgs, tools=tools).ids
    imported = resolve(tok, template=load_template(modelfile, "ollama")).render(msgs, tools=tools).ids
    ollama = ollama_oracle.ids(tok, ollama_oracle.prompt(body, msgs, tools, t.default_system))
    return own, imported, ollama


@pytest.mark.parametrize("name", ["qwen2.5", "chatml", "smollm2"])
@pytest.mark.parametrize("chat", CHATS)
def test_hermes_export_is_id_equal_to_ollama_and_chatlab(name, chat):
    own, imported, ollama = renders(name, *CHATS[chat])
    assert imported == ollama, "chatlab's Ollama semantics disagree with Go running Ollama's values"
    assert own == ollama, "the exported Modelfile does not render what chatlab renders"


@pytest.mark.parametrize("case", OUTSIDE)
def test_outside_the_layout_ollama_differs_and_chatlab_predicts_it(case):
    msgs = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1", OUTSIDE[case])]},
            {"role": "tool", "tool_call_id": "c1", "content": "18"}]
    own, imported, ollama = renders("qwen2.5", msgs, [WEATHER])
    assert imported == ollama
    assert own != ollama  # Ollama re-marshals the arguments from a Go map: not the text sent


def test_unsorted_properties_differ_in_ollama():
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}}}
    own, imported, ollama = renders("qwen2.5", [{"role": "user", "content": "x"}], [tool])
    assert imported == ollama and own != ollama  # a Go map ranges in sorted order: a before b


def test_certify_qwen25_tool_conversations_equal_for_ollama():
    tok = tokenizer_for(get_template("qwen2.5"))
    cert = certify(tok, "qwen2.5")
    for conv in ("tools", "tool call + result"):
        assert cert.cells["ollama"][conv].verdict == "id-equal", cert.format()


def test_other_tool_formats_are_refused_naming_the_format_and_export_without_tools():
    with pytest.raises(ChatlabError, match=r"json tool format.*only for hermes.*--drop-tools"):
        export_template("llama3", "ollama")
    assert ".Tools" not in export_template("llama3", "ollama", drop_tools=True)
    assert ".Tools" not in export_template("qwen2.5", "ollama", drop_tools=True)
    assert "$.Tools" in export_template("qwen2.5", "ollama")


# Ollama's own printing of its tool values, which the exported template avoids: chatlab's
# evaluator must still agree with Go on them (an imported template may print them).
PRINTS = ('{{- range .Messages }}{{ range .ToolCalls }}[{{ .Function.Arguments }}|{{ json . }}|'
          '{{ printf "%T %v %q" .Function.Name .Function.Index .Function.Name }}]{{ end }}{{ end }}'
          '{{ range .Tools }}<{{ . }}|{{ .Function }}|{{ .Function.Parameters.Properties }}|{{ json .Function }}'
          '{{ range $k, $p := .Function.Parameters.Properties }}|{{ $k }}={{ $p.Type }}{{ end }}>{{ end }}'
          '{{ if not .Tools }}no tools{{ end }}{{ len .Tools }}')


@pytest.mark.parametrize("tools", [None, [WEATHER, CLOCK]])
def test_ollama_value_printing_matches_go(tools):
    from test_engine_semantics import tok_with

    tok = tok_with("<|im_start|>", bos=None)
    msgs = CHATS["two calls, two results, then text"][0]
    loaded = load_template(f'FROM x\nTEMPLATE """{PRINTS}"""\n', "ollama")
    want = ollama_oracle.prompt(PRINTS, msgs, tools)
    assert resolve(tok, template=loaded).render(msgs, tools=tools).text == want


def test_every_builtin_with_tools_exports_them_id_equal_or_is_refused_naming_why():
    from chatlab.render import list_templates

    names = [n for n in list_templates() if get_template(n).tool_format is not None]
    equal, refused = [], {}
    for name in names:
        try:
            export_template(name, "ollama")
        except ChatlabError as err:
            refused[name] = str(err).split(";")[0]
            continue
        for chat, (msgs, tools) in CHATS.items():
            own, imported, ollama = renders(name, msgs, tools)
            assert own == imported == ollama, (name, chat)
        equal.append(name)
    print(f"\nOllama export with tools: tried {len(names)} built-ins with a tool format, exported and id-equal "
          f"to Ollama on {len(CHATS)} tool chats each {len(equal)} ({', '.join(equal)}), refused with a reason "
          f"{len(refused)}, silent mismatches 0")
    for name, why in refused.items():
        print(f"  {name:10s} {why}")
    assert set(equal) == {"chatml", "smollm2", "qwen2.5"}
    assert all("tool format" in why or "reasoning" in why for why in refused.values())
