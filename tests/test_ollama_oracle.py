"""Imported Ollama templates against Ollama's own execution (Go's text/template, tests/oracles).

Every template here is our own text; each exercises the constructs of the real one it stands for
(ollama/ollama, template/*.gotmpl), named above it. For each template x conversation, chatlab's
render must be id-equal to the Go oracle's prompt tokenized as Ollama does (bos added by the
tokenizer; special tokens parsed). Skips where Go is absent (apt-get install -y golang-go).
"""
from __future__ import annotations

import pytest

from chatlab.render import resolve
from chatlab.render.io import load_template
from oracles import ollama_oracle
from test_engine_semantics import tok_with

TEMPLATES = {
    # stands for template/qwen2.5.gotmpl: tools listed with `range $.Tools` + json in the system
    # turn, $last from len/slice, calls through .ToolCalls/.Function.Name/json .Function.Arguments,
    # tool results as user turns
    "qwen2.5-tools": """{{- if .Messages }}{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}{{- end }}
{{- if .Tools }}

# Tools
<tools>
{{- range .Tools }}
{{ json .Function }}
{{- end }}
</tools>{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ json .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}{{- else }}{{ if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}""",
    # stands for template/llama3.2.gotmpl: header ids, tools in the last user turn, printf,
    # `le` on the index, calls as JSON objects, ipython results
    "llama3.2-tools": """<|start_header_id|>system<|end_header_id|>

{{ if .System }}{{ .System }}{{ end }}<|eot_id|>
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq .Role "user" }}<|start_header_id|>user<|end_header_id|>

{{ if and $.Tools $last }}Tools: {{ range $.Tools }}{{ json . }} {{ end }}
{{ end }}{{ .Content }}<|eot_id|>{{ if $last }}<|start_header_id|>assistant<|end_header_id|>

{{ end }}
{{- else if eq .Role "assistant" }}<|start_header_id|>assistant<|end_header_id|>

{{ if .ToolCalls }}{{ range .ToolCalls }}{{ printf "{\\"name\\": %q, \\"parameters\\": %s}" .Function.Name (json .Function.Arguments) }}{{ end }}
{{- else }}{{ .Content }}{{ end }}{{ if not $last }}<|eot_id|>{{ end }}
{{- else if eq .Role "tool" }}<|start_header_id|>ipython<|end_header_id|>

{{ .Content }}<|eot_id|>{{ if $last }}<|start_header_id|>assistant<|end_header_id|>

{{ end }}
{{- end }}{{- if le $i -1 }}never{{ end }}
{{- end }}""",
    # stands for template/phi-3.gotmpl and zephyr.gotmpl: the role token built from parts
    "phi-3": """{{- range .Messages }}<|{{ .Role }}|>
{{ .Content }}<|end|>
{{ end }}<|assistant|>
""",
    # stands for template/gemma-instruct.gotmpl: `continue` past system messages, the system
    # text folded into the first user turn through $.System, model turns
    "gemma": """{{- range $i, $_ := .Messages }}
{{- if eq .Role "system" }}{{ continue }}{{ end }}
{{- if eq .Role "user" }}<start_of_turn>user
{{ if and $.System (le $i 1) }}{{ $.System }}

{{ end }}{{ .Content }}<end_of_turn>
{{ else }}<start_of_turn>model
{{ .Content }}<end_of_turn>
{{ end }}
{{- end }}<start_of_turn>model
""",
    # stands for template/llama2-chat.gotmpl style legacy templates: .System/.Prompt/.Response
    # rounds (no .Messages), with .Suffix tested and absent in chat
    "legacy-inst": """{{ if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>{{ else }}[INST] {{ if .System }}<<SYS>>{{ .System }}<</SYS>>

{{ end }}{{ .Prompt }} [/INST] {{ .Response }}{{ end }}""",
}
SPECIALS = ("<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<start_of_turn>", "<end_of_turn>", "</s>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & later",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"},
                                                          "unit": {"type": "string", "enum": ["c", "f"]}},
                         "required": ["city"]}}}]
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"unit": "c", "city": "Paris"}'}}
CHATS = {
    "single": ([{"role": "user", "content": "hi"}], None),
    "system": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], None),
    "multi": ([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"},
               {"role": "user", "content": "2+2?"}], None),
    "merged-users": ([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], None),
    "unicode-empty": ([{"role": "user", "content": "你好 — ünïcode 🎉"}, {"role": "assistant", "content": ""},
                       {"role": "user", "content": ""}], None),
    "tools": ([{"role": "user", "content": "Weather in Paris?"}], TOOLS),
    "tool-call-result": ([{"role": "user", "content": "Weather in Paris?"},
                          {"role": "assistant", "content": "", "tool_calls": [CALL]},
                          {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}], TOOLS),
}


@pytest.fixture(scope="module")
def tok():
    return tok_with(*SPECIALS, bos="<s>")


@pytest.mark.parametrize("default_system", [None, "You are kind."])
@pytest.mark.parametrize("name", TEMPLATES)
def test_ollama_import_is_id_equal_to_ollama(name, default_system, tok):
    body = TEMPLATES[name]
    modelfile = f'FROM x\nTEMPLATE """{body}"""\n' + (f'SYSTEM """{default_system}"""\n' if default_system else "")
    loaded = load_template(modelfile, "ollama")
    for chat, (msgs, tools) in CHATS.items():
        if tools and "Tools" not in body:
            continue  # Ollama refuses tools for such a template (test_template_io)
        want_text = ollama_oracle.prompt(body, msgs, tools, default_system)
        r = resolve(tok, template=loaded).render(msgs, tools=tools)
        assert r.text == "<s>" + want_text, (name, chat)
        assert r.ids == ollama_oracle.ids(tok, want_text), (name, chat)


def test_a_request_with_tools_keeps_the_ollama_tool_template(tok):
    """render_request (the server's and `chatlab render`'s step) swaps a template that cannot
    render tools for a built-in one; an Ollama template renders .Tools itself, so it stays."""
    loaded = load_template(f'FROM x\nTEMPLATE """{TEMPLATES["qwen2.5-tools"]}"""\n', "ollama")
    res = resolve(tok, template=loaded)
    msgs, tools = CHATS["tool-call-result"]
    used, r = res.render_request(msgs, tools)
    assert used is res and "<tool_call>" in r.text and '"city":"Paris"' in r.text
