"""`chatlab export`: cached, reused, quantized as asked, and never half-written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatlab.backends import export
from chatlab.cli import main
from chatlab.errors import ChatlabError, UnknownNameError

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def exported() -> dict[str, Path]:
    """The three exports in the real cache (built once per machine, reused afterwards)."""
    return {fmt: export.export_model(MODEL, fmt) for fmt in export.WEIGHT_FORMATS}


def weight_types(folder: Path) -> set[str]:
    """Element types of the large constants (the weights) in the exported graph."""
    import openvino as ov

    model = ov.Core().read_model(folder / "openvino_model.xml")
    return {op.get_element_type().get_type_name() for op in model.get_ops()
            if op.get_type_name() == "Constant" and op.get_output_size() and
            ov.Shape(op.get_output_shape(0)) and _numel(op.get_output_shape(0)) > 10_000}


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_exports_have_the_asked_weight_format(exported):
    assert weight_types(exported["fp32"]) == {"f32"}
    assert "u8" in weight_types(exported["int8"]) and "u4" not in weight_types(exported["int8"])
    assert "u4" in weight_types(exported["int4"])  # the tied embedding stays 8-bit
    for folder in exported.values():
        manifest = json.loads((folder / export.MANIFEST).read_text())
        assert manifest["export_version"] == export.EXPORT_VERSION
        assert (folder / "openvino_tokenizer.xml").is_file()  # openvino-genai needs it


def test_int4_group_size_divides_the_hidden_size(smollm2_path):
    assert export.int4_group_size(smollm2_path) == 64  # 576 = 9 x 64; the default 128 fails
    assert "--group-size" in export.cli_args(smollm2_path, "int4", Path("out"))


def test_an_existing_export_is_reused(exported, monkeypatch, capsys):
    def no_export(*_a, **_k):
        raise AssertionError("the cached export should have been reused")

    monkeypatch.setattr(export, "run_cli", no_export)
    assert export.export_model(MODEL, "int8") == exported["int8"]
    assert main(["export", "--model", MODEL, "--weight-format", "int8"]) == 0
    assert f"reused {MODEL} int8: {exported['int8']}" in capsys.readouterr().out


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_export_leaves_no_folder(tmp_path, monkeypatch, smollm2_path, error):
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    monkeypatch.setattr(export, "source_folder", lambda _m: smollm2_path)

    def half_written(args, desc):
        out = Path(args[-1])
        (out / "openvino_model.xml").write_text("<net>")  # partial output, then the interrupt
        raise error("interrupted")

    monkeypatch.setattr(export, "run_cli", half_written)
    with pytest.raises(error):
        export.export_model(MODEL, "int8")
    parent = export.export_dir(MODEL, "int8").parent
    assert not export.export_dir(MODEL, "int8").exists()
    assert list(parent.iterdir()) == []  # no temporary folder either


def test_a_failing_export_reports_the_log_and_leaves_nothing(tmp_path, monkeypatch, capsys,
                                                             smollm2_path):
    """The child process writes part of the export, prints an error and exits non-zero."""
    import sys

    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    monkeypatch.setattr(export, "source_folder", lambda _m: smollm2_path)
    script = ("import pathlib, sys; out = pathlib.Path(sys.argv[1]); "
              "(out / 'openvino_model.bin').write_bytes(b'0' * 100); "
              "print('ValueError: unsupported architecture'); sys.exit(3)")
    monkeypatch.setattr(export, "cli_args", lambda src, fmt, out: [sys.executable, "-c", script, str(out)])
    assert main(["export", "--model", MODEL, "--weight-format", "fp32"]) == 2
    err = capsys.readouterr().err
    assert "optimum-cli export failed (exit 3)" in err and "unsupported architecture" in err
    assert list(tmp_path.joinpath("openvino", MODEL).iterdir()) == []


def test_unknown_weight_format_and_model():
    with pytest.raises(UnknownNameError, match="valid choices: fp32, int8, int4"):
        export.export_model(MODEL, "fp8")
    with pytest.raises(UnknownNameError, match="smollm2-135m-instruct"):
        export.export_model("no-such-model", "int8")
    assert main(["export", "--model", MODEL, "--weight-format", "int2"]) == 2
