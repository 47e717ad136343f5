"""`chatlab export`: a model of the store → a cached OpenVINO folder, fp32, int8 or int4.

The conversion itself is optimum-intel's (`optimum-cli export openvino --task
text-generation-with-past`, which also converts the tokenizer for openvino-genai); it runs in a
child process so that an interrupt stops it cleanly and its memory is returned afterwards.
chatlab adds the cache discipline of the model store: the export is written to a temporary
folder next to its final place and renamed only once it is complete and readable, and a
manifest records what it was built from, so a half-written export is never reused.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from chatlab.errors import ChatlabError, UnknownNameError

WEIGHT_FORMATS = ["fp32", "int8", "int4"]
MANIFEST = "chatlab-export.json"
EXPORT_VERSION = 1  # bump when the export recipe changes, so old cache entries are rebuilt


def source_folder(model: str) -> Path:
    """The HF folder to export: a store asset (converted on first use) or a local folder."""
    from chatlab.models import asset_path
    from chatlab.models.assets import ASSETS

    if model in ASSETS and ASSETS[model].kind == "chat-model":
        return asset_path(model)
    if (Path(model) / "config.json").is_file():
        return Path(model).resolve()
    chat = [a.name for a in ASSETS.values() if a.kind == "chat-model"]
    raise UnknownNameError("model to export", model, chat + ["a local Hugging Face model folder"])


def export_dir(model: str, weight_format: str) -> Path:
    from chatlab.models import chatlab_home

    key = model if "/" not in model and "\\" not in model else Path(model).resolve().name
    return chatlab_home() / "openvino" / key / weight_format


def int4_group_size(folder: Path) -> int:
    """The largest usual group size dividing the layer widths (SmolLM2's 576 needs 64)."""
    config = json.loads((folder / "config.json").read_text())
    widths = [config.get("hidden_size"), config.get("intermediate_size")]
    for group in (128, 64, 32):
        if all(isinstance(w, int) and w % group == 0 for w in widths):
            return group
    return -1  # per-channel


def cli_args(src: Path, weight_format: str, out: Path) -> list[str]:
    args = [sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
            "--model", str(src), "--task", "text-generation-with-past",
            "--weight-format", weight_format]
    if weight_format == "int4":
        args += ["--group-size", str(int4_group_size(src)), "--ratio", "1.0"]
    return args + [str(out)]


def run_cli(args: list[str], desc: str) -> None:
    """Run optimum-cli, showing a progress line; on failure raise with the end of its log."""
    from tqdm.auto import tqdm

    tail: deque[str] = deque(maxlen=15)
    stage = "exporting graph"
    with tqdm(desc=desc, bar_format="{desc}: {elapsed} {postfix}", postfix=stage) as bar:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail.append(line.rstrip())
                if "Weight Compression" in line or "bitwidth" in line:
                    stage = "compressing weights"
                elif "tokenizer" in line.lower():
                    stage = "converting tokenizer"
                bar.set_postfix_str(stage)
            code = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted: do not leave the child writing
                proc.kill()
                proc.wait()
    if code != 0:
        log = "\n".join(tail)
        raise ChatlabError(f"optimum-cli export failed (exit {code}); the last lines were:\n{log}\n"
                           "Check that the model folder is a complete Hugging Face model.")


def is_exported(folder: Path) -> bool:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return data.get("export_version") == EXPORT_VERSION and (folder / "openvino_model.xml").is_file()


def export_model(model: str = "smollm2-135m-instruct", weight_format: str = "int8",
                 force: bool = False) -> Path:
    """The cached export folder, building it first when it is missing (or `force`)."""
    from chatlab.models.store import atomic_folder

    if weight_format not in WEIGHT_FORMATS:
        raise UnknownNameError("weight format", weight_format, WEIGHT_FORMATS)
    final = export_dir(model, weight_format)
    if is_exported(final) and not force:
        return final
    src = source_folder(model)
    t0 = time.perf_counter()
    with atomic_folder(final) as tmp:
        run_cli(cli_args(src, weight_format, tmp), f"export {Path(model).name} {weight_format}")
        verify(tmp)
        (tmp / MANIFEST).write_text(json.dumps({
            "model": model, "weight_format": weight_format, "source": str(src),
            "export_version": EXPORT_VERSION, "seconds": round(time.perf_counter() - t0, 1)},
            indent=2))
    return final


def verify(folder: Path) -> None:
    """Refuse an export that OpenVINO cannot read or that lacks the stateful KV cache."""
    import openvino as ov

    xml = folder / "openvino_model.xml"
    if not xml.is_file():
        raise ChatlabError(f"the export wrote no {xml.name}; rerun with `chatlab export --force`")
    model = ov.Core().read_model(xml)
    names = {i.get_any_name() for i in model.inputs}
    if "beam_idx" not in names or not model.get_variables():
        raise ChatlabError("the export is not stateful (no KV-cache state); it cannot be used "
                           "by chatlab's OpenVINO loop")
