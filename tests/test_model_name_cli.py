"""A `--model` that is neither a store name, a folder holding a model, nor a hub id gets a
one-line error (exit 2) from every command that loads a model — never a traceback."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from chatlab.cli import main


@pytest.fixture()
def messages(tmp_path: Path) -> Path:
    path = tmp_path / "messages.json"
    path.write_text('[{"role": "user", "content": "hi"}]')
    return path


def bad_names(tmp_path: Path) -> list[str]:
    empty = tmp_path / "empty"
    empty.mkdir()
    relative = os.path.relpath(empty)  # like ../../etc: an existing folder, given relatively
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a model")
    return ["/etc", relative, str(a_file), "no-such-model", "a/b/c", "x" * 100_000, "nul\x00name"]


@pytest.mark.parametrize("command", [["render", "--messages", "{m}"], ["audit"],
                                     ["complete", "--messages", "{m}"], ["serve", "--port", "0"]])
def test_bad_model_names_are_one_line_errors(command: list[str], messages: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for name in bad_names(tmp_path):
        argv = [a.replace("{m}", str(messages)) for a in command] + ["--model", name]
        assert main(argv) == 2, name[:40]
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"chatlab {command[0]}: error: ") and "\n" not in err, err[:300]
        assert "model" in err and "Traceback" not in err


def test_folder_without_a_model_says_what_it_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds no model" in err and "config.json" in err and "chatlab models" in err
