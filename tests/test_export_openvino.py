"""`chatlab export`: cached, reused, quantized as asked, and never half-written."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
        manifest = json.loads((folder / export.EXPORT_MANIFEST).read_text())
        assert manifest["export_version"] == export.EXPORT_VERSION
        assert (folder / "openvino_tokenizer.xml").is_file()  # openvino-genai needs it


def test_int4_group_size_divides_the_hidden_size(smollm2_path):
    assert export.int4_group_size(smollm2_path) == 64  # 576 = 9 x 64; the default 128 fails
    assert "--group-size" in export.cli_args(smollm2_path, "int4", Path("out"))


def test_an_existing_export_is_reused(exported, monkeypatch, capsys):
    stateless = export.export_model(MODEL, "int8", stateful=False)  # notebook 03's; built if missing

    def no_export(*_a, **_k):
        raise AssertionError("the cached export should have been reused")

    monkeypatch.setattr(export, "run_cli", no_export)
    assert export.export_model(MODEL, "int8") == exported["int8"]
    assert main(["export", "--model", MODEL, "--weight-format", "int8"]) == 0
    assert f"reused {MODEL} int8: {exported['int8']}" in capsys.readouterr().out
    assert main(["export", "--model", MODEL, "--weight-format", "int8", "--stateless"]) == 0
    assert f"reused {MODEL} int8 stateless: {stateless}" in capsys.readouterr().out


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_export_leaves_no_folder(tmp_path, monkeypatch, smollm2_path, error):
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    monkeypatch.setattr(export, "source_folder", lambda _m: smollm2_path)

    def half_written(args, desc, out=None):
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
    monkeypatch.setattr(export, "cli_args",
                        lambda src, fmt, out, stateful=True: [sys.executable, "-c", script, str(out)])
    assert main(["export", "--model", MODEL, "--weight-format", "fp32"]) == 2
    err = capsys.readouterr().err
    assert f"chatlab: exporting {MODEL} to OpenVINO fp32 (once" in err  # said before the wait
    assert "optimum-cli export failed (exit 3)" in err and "unsupported architecture" in err
    assert list(tmp_path.joinpath("openvino", MODEL).iterdir()) == []


def test_unknown_weight_format_and_model():
    with pytest.raises(UnknownNameError, match="valid choices: fp32, int8, int4"):
        export.export_model(MODEL, "fp8")
    with pytest.raises(UnknownNameError, match="smollm2-135m-instruct"):
        export.export_model("no-such-model", "int8")
    assert main(["export", "--model", MODEL, "--weight-format", "int2"]) == 2


def test_export_progress_is_shown_on_stderr(tmp_path, capsys):
    """The stage bar follows optimum-cli's log and output folder, and keeps ticking while the
    child is silent."""
    script = ("import pathlib, sys, time; print('Applying Weight Compression', flush=True); "
              "time.sleep(1.2); pathlib.Path(sys.argv[1], 'openvino_model.xml').write_text('<net/>'); "
              "time.sleep(1.2)")
    export.run_cli([sys.executable, "-c", script, str(tmp_path)], "export m int8", tmp_path)
    err = capsys.readouterr().err
    assert "export m int8: stage 1/3, converting the graph" in err
    assert "stage 2/3, compressing weights" in err and "stage 3/3, converting the tokenizer" in err
    assert "stage 3/3, done" in err
    assert err.count("compressing weights") >= 2  # refreshed during the silent second


def hf_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"hidden_size": 64, "intermediate_size": 256}')
    return path


def test_same_named_folders_get_their_own_export(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))
    a, b = hf_folder(tmp_path / "a" / "model"), hf_folder(tmp_path / "b" / "model")
    da, db = export.export_dir(str(a), "int8"), export.export_dir(str(b), "int8")
    assert da != db and da.parent.name.startswith("model-") and db.parent.name.startswith("model-")
    assert export.export_dir(str(a), "int8") == da  # stable while the folder is unchanged
    (a / "model.safetensors").write_bytes(b"other weights")  # a different model in the same place
    assert export.export_dir(str(a), "int8") != da
    assert export.export_dir(MODEL, "int8").parent.name == MODEL  # store models keep their name


# A stand-in for `chatlab export`: its "optimum-cli" child records its pid, then sleeps.
KILLED_EXPORT = """
import sys
from chatlab.backends import export
sleeper = ("import os, sys, time; open(os.path.join(sys.argv[1], 'child.pid'), 'w')"
           ".write(str(os.getpid())); time.sleep(120)")
export.cli_args = lambda src, fmt, out, stateful=True: [sys.executable, "-c", sleeper, str(out)]
export.export_model(sys.argv[1], "int8")
"""


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie waiting for a reaper counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_killed_export_takes_its_child_along_and_is_swept(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    src = hf_folder(tmp_path / "src" / "model")
    env = {**os.environ, "CHATLAB_HOME": str(home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, "-c", KILLED_EXPORT, str(src)], env=env,
                              stderr=subprocess.DEVNULL)
    partial = export.export_dir(str(src), "int8").with_name(export.PARTIAL + "int8")
    pid_file = partial / "child.pid"
    try:
        assert wait_until(lambda: pid_file.is_file() and pid_file.read_text(), 60)
        child = int(pid_file.read_text())
        assert alive(child)
    finally:
        parent.send_signal(signal.SIGKILL)  # what `kill -9` of `chatlab export` does
        parent.wait()
    assert wait_until(lambda: not alive(child), 10), "optimum-cli outlived chatlab export"
    assert partial.is_dir()  # nobody could clean up after a SIGKILL ...
    assert export.sweep_partials() == [partial]  # ... so the next run does
    assert not partial.exists()


def test_a_live_export_is_not_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path))
    final = tmp_path / "openvino" / "m" / "int8"
    partial = final.with_name(export.PARTIAL + "int8")
    partial.mkdir(parents=True)
    with export.export_lock(final):  # another export is writing it right now
        assert export.sweep_partials() == [] and partial.is_dir()
    assert export.sweep_partials() == [partial]
