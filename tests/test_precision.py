"""Inference precision: names, the bf16 capability check, the CLI flags and defaults."""
from __future__ import annotations

import json

import pytest

from chatlab.backends import load_backend, precision
from chatlab.cli import build_parser, main
from chatlab.errors import ChatlabError, UnknownNameError


def test_names_and_aliases() -> None:
    assert precision.normalize_precision(None) == "f32"  # the default
    for spelling in ("f32", "FP32", "float32"):
        assert precision.normalize_precision(spelling) == "f32"
    for spelling in ("bf16", "bfloat16"):
        assert precision.normalize_precision(spelling) == "bf16"
    with pytest.raises(UnknownNameError, match="inference precision 'f64'; valid choices: f32, bf16"):
        precision.normalize_precision("f64")


def test_openvino_type_names_are_chatlab_names() -> None:
    import openvino as ov

    assert precision.type_name(ov.Type.f32) == "f32"
    assert precision.type_name(ov.Type.bf16) == "bf16"
    assert precision.type_name(ov.Type.f16) == "f16"  # reported as is, never asked for


def test_bf16_without_cpu_support_is_a_clear_error(fake_cpu) -> None:  # noqa: ANN001
    here = fake_cpu(bf16=False)
    with pytest.raises(ChatlabError, match="avx512_bf16 or amx_bf16") as err:
        precision.check_precision("bf16")
    assert "--precision f32" in str(err.value) and here.model in str(err.value)  # the fix, the CPU
    assert precision.check_precision("f32") == "f32"
    # refused before any model is loaded or exported (no such model exists)
    for backend in ("openvino", "torch"):
        with pytest.raises(ChatlabError, match="--precision f32"):
            load_backend("no-such-model", backend, precision="bf16")


def test_bf16_accepted_where_the_cpu_has_it(fake_cpu) -> None:  # noqa: ANN001
    fake_cpu(bf16=True)
    assert precision.check_precision("bfloat16") == "bf16"


@pytest.mark.real_cpu
def test_cpu_capability_agrees_with_proc_cpuinfo() -> None:
    """OpenVINO's own capability list and the kernel's flags tell the same story, and the
    plugin's default precision follows them."""
    here = precision.cpu()
    assert here.model and here.threads >= 1 and here.flags
    assert here.bf16 == precision.flags_say_bf16(here.flags)
    assert here.default_precision == ("bf16" if here.bf16 else "f32")
    assert precision.cpu_info() == {"model": here.model, "threads": here.threads, "bf16": here.bf16,
                                    "flags": [f for f in precision.REPORTED_FLAGS if f in here.flags]}


def test_every_reader_sees_the_one_cpu(fake_cpu) -> None:  # noqa: ANN001
    """The fast profile, the precision check, doctor, the bench's record and the notebooks'
    "measured on" line all read the CPU through precision.cpu(), so one fake reaches them all."""
    from chatlab.backends.precision import fast_choices
    from chatlab.lab.bench.report import cpu_line
    from chatlab.lab.doctor import machine
    from chatlab.lab.evals import measured_on

    for bf16 in (False, True):
        here = fake_cpu(bf16=bf16, model=f"CPU {bf16}", threads=3)
        assert fast_choices("openvino", "int4", None, {})[0] == ("bf16" if bf16 else "f32")
        if bf16:
            assert precision.check_precision("bf16") == "bf16"
        else:
            with pytest.raises(ChatlabError, match=here.model):
                precision.check_precision("bf16")
        facts = machine()
        assert facts["cpu"]["model"] == here.model and facts["cpu"]["bf16"] is bf16 and facts["threads"] == 3
        assert facts["cpu"]["openvino"]["default_precision"] == ("bf16" if bf16 else "f32")
        assert cpu_line(precision.cpu_info()).startswith(f"CPU: {here.model}; ")
        assert f"({'bf16 native' if bf16 else 'no bf16'}); 3 threads" in cpu_line(precision.cpu_info())
        assert measured_on().startswith(f"3 cores, {here.model}, ")


def test_cli_defaults_are_the_fast_exact_path() -> None:
    parser = build_parser()
    for command in (["complete", "--messages", "m.json"], ["serve"]):
        args = parser.parse_args(command)
        # precision None is f32 (check_precision), unless --fast picks the fast profile's
        assert (args.backend, args.weight_format, args.precision) == ("openvino", None, None)
        assert args.fast is None and parser.parse_args([*command, "--fast"]).fast is True
    args = parser.parse_args(["serve", "--backend", "torch", "--precision", "bf16"])
    assert (args.backend, args.precision) == ("torch", "bf16")
    assert parser.parse_args(["bench"]).precision == "f32"
    assert parser.parse_args(["bench", "--precision", "bf16"]).precision == "bf16"


def test_default_weight_format_follows_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--backend torch` alone must not inherit OpenVINO's int8 default."""
    from chatlab.backends import openvino, torch

    seen = {}
    monkeypatch.setattr(torch, "load", lambda model, **kw: seen.setdefault("torch", kw))
    monkeypatch.setattr(openvino, "load", lambda model, fmt, **kw: seen.setdefault("openvino", (fmt, kw)))
    load_backend("m", "torch")
    load_backend("m")
    assert seen["torch"] == {"precision": "f32"}
    assert seen["openvino"] == ("int8", {"precision": "f32"})


def test_cli_rejects_bad_precision_and_backend(tmp_path, capsys: pytest.CaptureFixture[str],
                                               fake_cpu) -> None:  # noqa: ANN001
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert main(["complete", "--messages", str(msgs), "--precision", "f64"]) == 2
    assert "valid choices: f32, bf16" in capsys.readouterr().err
    assert main(["complete", "--messages", str(msgs), "--backend", "tensorrt"]) == 2
    assert "unknown backend 'tensorrt'; valid choices: torch, openvino, genai" in capsys.readouterr().err
    assert main(["bench", "--precision", "half"]) == 2
    assert "valid choices: f32, bf16" in capsys.readouterr().err
    fake_cpu(bf16=False)
    assert main(["bench", "--precision", "bf16"]) == 2
    assert "--precision f32" in capsys.readouterr().err


def test_f32_turns_dynamic_quantization_off_unless_asked() -> None:
    """f32 means f32 activations too: the plugin's int8 activation quantization moved greedy
    tokens on an AMX CPU (paged vs stateful graphs parted at token 25)."""
    from chatlab.backends.precision import ov_config

    assert ov_config("f32")["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 0
    assert "DYNAMIC_QUANTIZATION_GROUP_SIZE" not in ov_config("f32", dynamic_quantization=True)
    assert "DYNAMIC_QUANTIZATION_GROUP_SIZE" not in ov_config("bf16")
    assert ov_config("bf16", dynamic_quantization=False)["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 0
