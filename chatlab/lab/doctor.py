"""`chatlab doctor`: what this machine has, what it means for chatlab, and how to fix problems."""
from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import sys

from chatlab._thirdparty import Jsonable
from chatlab.backends.export import WEIGHT_FORMATS, is_exported
from chatlab.backends.precision import BF16_FLAGS, cpu
from chatlab.lab import PYTHONS
from chatlab.lab.colab import installed_versions
from chatlab.models.assets import get_asset
from chatlab.models.cache import stale_folders
from chatlab.models.store import all_assets, chatlab_home, describe

PACKAGES = ["torch", "transformers", "tokenizers", "optimum-intel", "openvino", "openvino-genai",
            "jsonschema"]
FLAGS = ["sse4_2", "avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
         "amx_tile", "amx_bf16", "amx_int8"]
MIN_FREE_MEMORY = 2 * 1024**3
MIN_FREE_DISK = 1 * 1024**3


def problem(what: str, fix: str) -> dict[str, str]:
    return {"problem": what, "fix": fix}


def cpu_report() -> dict[str, Jsonable]:
    """The CPU's model and flags, and what they mean for OpenVINO beside its real default here."""
    here = cpu()
    flags = {f: f in here.flags for f in FLAGS}
    return {"model": here.model, "flags": flags, "bf16": here.bf16,
            "openvino": {**openvino_meaning(flags), "default_precision": here.default_precision}}


def openvino_meaning(flags: dict[str, bool]) -> dict[str, str]:
    """What the flags mean for OpenVINO's CPU plugin, which picks its precision from them."""
    if any(flags.get(f) for f in BF16_FLAGS):
        return {"expected_default_precision": "bf16", "meaning": (
            "OpenVINO computes in bf16 by default on this CPU: faster, but greedy answers drift "
            "from PyTorch fp32 after some tokens (a SmolLM2 int8 export answered the Paris "
            "question wrongly on such a CPU). Pass precision='f32' (INFERENCE_PRECISION_HINT=f32) "
            "for answers equal to PyTorch" + (
                "; AMX makes bf16 and int8 matrix products much faster" if flags.get("amx_tile")
                else ""))}
    if flags.get("avx512f"):
        return {"expected_default_precision": "f32", "meaning": (
            "AVX-512 without bf16: OpenVINO computes in f32 by default, so answers match PyTorch; "
            + ("VNNI speeds up int8" if flags.get("avx512_vnni") else "int8 gains less without VNNI"))}
    if flags.get("avx2"):
        return {"expected_default_precision": "f32", "meaning": (
            "AVX2 only: OpenVINO computes in f32 by default (answers match PyTorch); int8 exports "
            "still help" + (" (AVX-VNNI speeds them up)" if flags.get("avx_vnni") else ""))}
    return {"expected_default_precision": "f32", "meaning": (
        "no AVX2: OpenVINO falls back to slow SSE4.2 kernels; expect several times lower speed")}


def versions() -> dict[str, str | None]:
    return {"python": sys.version.split()[0], **installed_versions(list(PACKAGES))}


def pinned() -> dict[str, str]:
    """chatlab's own pins (from its installed metadata), to compare with what is installed."""
    try:
        requires = md.requires("chatlab") or []
    except md.PackageNotFoundError:
        return {}
    found = (re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", req.strip()) for req in requires)
    return {m.group(1).lower(): m.group(2) for m in found if m}


def _same_version(have: str, want: str) -> bool:
    """2026.4.1.0 is 2026.4.1; 2.13.0+cpu is the pinned 2.13.0 (the local label names the build)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(have.split("+")[0]) == Version(want)
    except InvalidVersion:
        return have == want


def cache_report() -> dict[str, Jsonable]:
    home = chatlab_home()
    probe = next(p for p in (home, *home.parents) if p.exists())  # the nearest that exists
    exports = sorted(f"{d.parent.name}/{d.name}" for d in (home / "openvino").glob("*/*")
                     if d.name in WEIGHT_FORMATS and is_exported(d))
    return {"home": str(home), "writable": os.access(probe, os.W_OK),
            "free_bytes": shutil.disk_usage(probe).free, "exports": exports,
            "stale_temp_folders": [str(p) for p in stale_folders(home)]}


def models_report() -> list[dict[str, Jsonable]]:
    keys = ("name", "kind", "available", "state", "problems", "optional", "path", "source")
    return [{k: row[k] for k in keys} for row in map(describe, all_assets())]


def find_problems(report: dict[str, Jsonable]) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    if tuple(map(int, report["versions"]["python"].split(".")[:2])) not in PYTHONS:
        found.append(problem(f"Python {report['versions']['python']} is not supported",
                             "use Python 3.11, 3.12 or 3.13: PYTHON=python3.13 ./run.sh setup"))
    for name, want in report["pins"].items():
        have = report["versions"].get(name)
        if have is None:
            found.append(problem(f"{name} is not installed", f"./run.sh setup (or pip install {name}=={want})"))
        elif not _same_version(have, want):
            found.append(problem(f"{name} {have} is installed; chatlab pins {want}",
                                 f"pip install {name}=={want}"))
    for row in report["models"]:
        if not row["available"] and not row["optional"]:
            found.append(problem(f"{row['name']} is not available offline",
                                 get_asset(row["name"]).install_hint))
        if row["state"] in ("damaged", "unchecked"):
            found.append(problem(f"{row['name']}: " + "; ".join(row["problems"]),
                                 f"chatlab models --build {row['name']}"))
    cache = report["cache"]
    if not cache["writable"]:
        found.append(problem(f"the cache {cache['home']} is not writable",
                             "set CHATLAB_HOME to a writable folder"))
    if cache["free_bytes"] < MIN_FREE_DISK:
        found.append(problem(f"only {cache['free_bytes'] / 1e6:,.0f} MB free at {cache['home']}",
                             "free disk space or set CHATLAB_HOME to a folder on a larger disk"))
    for tmp in cache["stale_temp_folders"]:
        found.append(problem(f"a killed build left {tmp}",
                             f"rm -r {tmp} (the next chatlab models --build also removes it)"))
    if report["memory"]["available_bytes"] < MIN_FREE_MEMORY:
        found.append(problem(f"only {report['memory']['available_bytes'] / 1e6:,.0f} MB of memory free",
                             "close other programs; the default model needs about 1.2 GB"))
    return found


def collect() -> dict[str, Jsonable]:
    facts = machine()
    report: dict[str, Jsonable] = {
        "versions": facts["versions"], "pins": {k: v for k, v in pinned().items() if k in PACKAGES},
        "cpu": facts["cpu"], "memory": facts["memory"],
        # The cache first: listing the models may build the ChatGLM3 stand-in, which sweeps.
        "cache": cache_report(), "models": models_report(),
    }
    report["problems"] = find_problems(report)
    return report


def machine() -> dict[str, Jsonable]:
    """What a speed or precision result depends on (CPU, threads, memory, versions); no paths."""
    import psutil

    vm = psutil.virtual_memory()
    return {"cpu": cpu_report(), "threads": cpu().threads,
            "memory": {"total_bytes": vm.total, "available_bytes": vm.available}, "versions": versions()}


def machine_lines(facts: dict[str, Jsonable]) -> list[str]:
    """`machine()` as a few lines of text."""
    cpu, ov, v = facts["cpu"], facts["cpu"]["openvino"], facts["versions"]
    flags = " ".join(f for f, on in cpu["flags"].items() if on) or "none of note"
    return [f"cpu: {cpu['model']}, {facts['threads']} threads for this process; flags: {flags}",
            f"OpenVINO default precision here: {ov['default_precision'] or 'unknown (OpenVINO missing)'} "
            f"(expected from the flags: {ov['expected_default_precision']})",
            ov["meaning"],
            f"memory: {_gb(facts['memory']['total_bytes'])} total; "
            + ", ".join(f"{k} {v[k] or 'missing'}" for k in v)]


def _gb(n: int) -> str:
    return f"{n / 1024**3:.1f} GB"


def print_report(report: dict[str, Jsonable]) -> None:
    v = report["versions"]
    print("versions: " + ", ".join(f"{k} {v[k] or 'missing'}" for k in v))
    cpu, ov = report["cpu"], report["cpu"]["openvino"]
    print(f"cpu: {cpu['model']}; flags: " + (" ".join(f for f, on in cpu["flags"].items() if on) or "none"))
    print(f"    OpenVINO default precision: {ov['default_precision'] or 'unknown (OpenVINO missing)'} "
          f"(expected from the flags: {ov['expected_default_precision']})")
    print(f"    {ov['meaning']}")
    mem, cache = report["memory"], report["cache"]
    print(f"memory: {_gb(mem['available_bytes'])} available of {_gb(mem['total_bytes'])}")
    print(f"cache: {cache['home']} ({'writable' if cache['writable'] else 'NOT writable'}, "
          f"{_gb(cache['free_bytes'])} free)")
    for row in report["models"]:
        where = f": {row['path']}" if row["path"] else ""
        avail = "available offline" if row["available"] else "not available offline"
        print(f"    {row['name']:<28} {avail}, {row['state']}{where}")
    print("    OpenVINO exports: " + (", ".join(cache["exports"]) or "none"))
    if not report["problems"]:
        print("no problems found")
    for p in report["problems"]:
        print(f"problem: {p['problem']}\n    fix: {p['fix']}")
