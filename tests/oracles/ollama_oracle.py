"""Ollama's template execution as an oracle: Go's own text/template, driven by ollama_go/main.go
(a harness written for chatlab that prepares the values as Ollama's template.go does). Built once
per test session with the Go toolchain; skips, naming the install, when `go` is absent."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

HOW = "Go toolchain absent: apt-get install -y golang-go (the Ollama oracle is built from tests/oracles/ollama_go)"
SOURCE = Path(__file__).parent / "ollama_go" / "main.go"


@lru_cache(maxsize=1)
def _binary() -> str | None:
    go = shutil.which("go")
    if go is None:
        return None
    out = Path(tempfile.mkdtemp(prefix="chatlab-ollama-oracle-")) / "oracle"
    subprocess.run([go, "build", "-o", str(out), str(SOURCE)], check=True, capture_output=True, timeout=600)
    return str(out)


def _message(m: dict) -> dict:
    out = {"role": m["role"], "content": m.get("content") or "", "tool_call_id": m.get("tool_call_id", ""),
           "tool_name": m.get("name", "")}
    calls = []
    for k, c in enumerate(m.get("tool_calls") or []):
        args = c["function"]["arguments"]
        calls.append({"id": c.get("id", ""), "function": {"index": k, "name": c["function"]["name"],
                      "arguments": json.loads(args) if isinstance(args, str) else args}})
    out["tool_calls"] = calls
    return out


def prompt(template: str, messages: list[dict], tools: list[dict] | None = None, system: str | None = None) -> str:
    """The text Ollama renders for this chat (OpenAI-shaped messages and tools)."""
    binary = _binary()
    if binary is None:
        pytest.skip(HOW)
    data = {"template": template, "system": system or "", "messages": [_message(m) for m in messages],
            "tools": tools or None}
    done = subprocess.run([binary], input=json.dumps(data), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"the Go oracle failed: {done.stderr}")
    return done.stdout


def ids(tokenizer: Any, text: str) -> list[int]:
    """Ollama's tokenize(prompt, add_special=true, parse_special=true)."""
    out = list(tokenizer.encode(text, add_special_tokens=False))
    if tokenizer.bos_token_id is not None and list(tokenizer.encode("a", add_special_tokens=True))[:1] == [tokenizer.bos_token_id]:
        out = [tokenizer.bos_token_id, *out]
    return out
