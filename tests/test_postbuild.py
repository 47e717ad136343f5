"""Binder's postBuild warms the cache with real chatlab commands: each `chatlab ...` line must
parse with the CLI as it is today (a renamed flag would otherwise surface only as a failed Binder
build), and together they must leave what a session needs: the default model built and its int8
export (the default of `chatlab serve` / `complete`) in the cache."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

POSTBUILD = Path(__file__).resolve().parents[1] / "postBuild"


def chatlab_commands() -> list[list[str]]:
    """The argument lists of postBuild's `chatlab` lines (an `|| true` tail dropped)."""
    commands = []
    for line in POSTBUILD.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == "chatlab":
            if "||" in words:
                words = words[:words.index("||")]
            commands.append(words[1:])
    return commands


def test_postbuild_builds_the_default_model_and_its_int8_export() -> None:
    from chatlab.models import DEFAULT_MODEL

    commands = chatlab_commands()
    assert ["models", "--build", DEFAULT_MODEL] in commands
    for fmt in ("int8", "int4", "fp32"):  # every export a notebook loads, so no session exports
        assert ["export", "--model", DEFAULT_MODEL, "--weight-format", fmt] in commands
    assert ["export", "--model", DEFAULT_MODEL, "--weight-format", "int8", "--stateless"] in commands
    text = POSTBUILD.read_text()
    assert text.index("pip install --no-deps -e .") < text.index("chatlab models")  # installed first


def test_postbuild_commands_parse_with_the_real_cli() -> None:
    from chatlab.backends import WEIGHT_FORMATS
    from chatlab.cli import build_parser
    from chatlab.models import ASSETS

    parser = build_parser()
    for args in chatlab_commands():
        parsed = parser.parse_args(args)  # argparse exits (SystemExit) on an unknown flag
        assert getattr(parsed, "func", None), args
        for name in getattr(parsed, "build", None) or []:
            assert name in ASSETS, f"postBuild builds {name!r}, which the store does not know"
        if parsed.command == "export":
            assert parsed.model in ASSETS and parsed.weight_format in WEIGHT_FORMATS, args


@pytest.mark.slow
def test_postbuild_commands_run_and_leave_the_cache_warm(capsys: pytest.CaptureFixture[str]) -> None:
    """Run against this machine's cache (cheap once built: the store checks its build record,
    the exports are reused); exit status 0 for all but doctor, whose problems postBuild ignores."""
    from chatlab.backends.export import export_dir, is_exported
    from chatlab.cli import main
    from chatlab.models import DEFAULT_MODEL
    from chatlab.models.assets import get_asset
    from chatlab.models.store import describe

    for args in chatlab_commands():
        rc = main(args)
        assert args[0] == "doctor" or rc == 0, (args, capsys.readouterr().err[-2000:])
    assert describe(get_asset(DEFAULT_MODEL))["state"] == "built"
    assert is_exported(export_dir(DEFAULT_MODEL, "int8"))
    assert is_exported(export_dir(DEFAULT_MODEL, "int8", stateful=False))
