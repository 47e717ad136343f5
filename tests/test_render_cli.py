"""`chatlab render | templates | audit | export-template` through the real entry point."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chatlab.cli import main
from chatlab.render import list_templates
from chatlab.render.io import export_template


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path):
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "你好 <|user|>"}]), encoding="utf-8")
    tools = tmp_path / "t.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]))
    return msgs, tools


def test_templates_lists_names_first(capsys):
    code, out, _ = run(capsys, "templates")
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == list_templates()


def test_render_json(capsys, files):
    msgs, tools = files
    code, out, _ = run(capsys, "render", "--model", "chatglm3-6b", "--messages", str(msgs),
                       "--tools", str(tools), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["rule"] == "model-renderer" and data["template"] == "chatglm3"
    assert len(data["ids"]) == len(data["tokens"]) and data["slots"][0]["slot"] == "prefix"
    assert data["stop_ids"] and "tokenizer" in data and data["tool_format"] == "chatglm3"
    assert '"name": "f"' in data["text"]


def test_render_ids_and_text(capsys, files):
    msgs, _ = files
    code, out, _ = run(capsys, "render", "--model", "smollm2-135m-instruct", "--template", "chatml",
                       "--messages", str(msgs), "--format", "ids")
    assert code == 0 and all(x.isdigit() for x in out.split())
    code, out, _ = run(capsys, "render", "--model", "smollm2-135m-instruct", "--messages", str(msgs))
    assert code == 0 and "<|im_start|>user\n你好 <|user|><|im_end|>" in out and "tokenizer-template" in out


@pytest.mark.parametrize("argv, fragment", [
    (["render", "--model", "smollm2-135m-instruct", "--messages", "/nonexistent.json"], "does not exist"),
    (["render", "--model", "nope-model", "--messages", "{msgs}"], "valid choices"),
    (["render", "--model", "smollm2-135m-instruct", "--template", "nope", "--messages", "{msgs}"], "valid choices"),
    (["render", "--model", "smollm2-135m-instruct", "--messages", "{bad}"], "unknown role"),
    (["export-template", "nope"], "valid choices: chatml"),
])
def test_errors_without_traceback(capsys, files, tmp_path, argv, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"role": "robot", "content": "x"}]))
    argv = [a.format(msgs=files[0], bad=bad) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2 and fragment in err and "Traceback" not in err


def test_audit_exit_codes(capsys):
    code, out, _ = run(capsys, "audit", "--model", "chatglm3-6b")
    assert code == 1 and "split-special" in out
    code, out, _ = run(capsys, "audit", "--model", "smollm2-135m-instruct", "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_export_template_prints_the_export():
    proc = subprocess.run([sys.executable, "-m", "chatlab.cli", "export-template", "chatml"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == export_template("chatml") + "\n"


def test_render_tools_matches_the_server_render(capsys, tmp_path):
    """`chatlab render --tools` and /v1/chat/render run one render step (Resolution.render_request):
    tools and the assistant's tool call are rendered the same, id for id (issue 20: the CLI
    once dropped them with SmolLM2's tool-less GGUF template, 28 ids against the server's 232)."""
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine, parse_request
    from chatlab.models import load_tokenizer

    model = "smollm2-135m-instruct"
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    history = [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "18C"}]
    msgs, tool_file = tmp_path / "m.json", tmp_path / "t.json"
    msgs.write_text(json.dumps(history))
    tool_file.write_text(json.dumps(tools))
    code, out, _ = run(capsys, "render", "--model", model, "--messages", str(msgs), "--tools", str(tool_file),
                       "--format", "json")
    cli = json.loads(out)
    engine = ChatEngine(ScriptedBackend(load_tokenizer(model), ["ok"]), model)
    server = engine.render(parse_request({"messages": history, "tools": tools}))
    assert code == 0 and cli["ids"] == server["ids"] and cli["tool_format"] == server["tool_format"]
    assert "get_weather" in cli["text"] and '"city": "Paris"' in cli["text"]  # tools and the call
