"""`chatlab export`: a model of the store → a cached OpenVINO folder, fp32, int8 or int4.

The conversion itself is optimum-intel's (`optimum-cli export openvino --task
text-generation-with-past`); it runs in a child process (chatlab.backends.child; its Python:
chatlab.backends.export_env) that dies with chatlab. chatlab adds the cache discipline:

* one export per (source, weight format) at a time: a lock file, so two processes sharing the
  cache wait for each other instead of exporting twice;
* the export is written to `.partial-<format>` next to its final place and renamed only once it
  is complete and readable; a partial folder whose lock is free belongs to a dead export and is
  swept at the start of the next one;
* a store model is cached under its name; a local folder under its name plus a hash of its
  resolved path and its files' sizes and times, so two folders called `model` never share one;
  a hub id is its snapshot folder in the Hugging Face cache (`chatlab.models.local_model`).
* `stateful=False` (optimum's `--disable-stateful`) exports the graph with its KV cache as plain
  inputs and outputs (what chatlab.lab.explicit_kv drives), in a cache entry of its own.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chatlab.backends.child import run_cli
from chatlab.backends.export_env import export_python
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.models import asset_path, chatlab_home, local_model
from chatlab.models.assets import ASSETS
from chatlab.models.load import _exists, _looks_like_hub_id

WEIGHT_FORMATS = ["fp32", "int8", "int4"]
EXPORT_MANIFEST = "chatlab-export.json"
EXPORT_VERSION = 1  # bump when the export recipe changes, so old cache entries are rebuilt
PARTIAL = ".partial-"  # prefix of an export being written


def _is_store_model(model: str) -> bool:
    return model in ASSETS and ASSETS[model].kind == "chat-model"


def source_folder(model: str) -> Path:
    """The HF folder to export: a store asset (converted on first use) or a local folder."""
    if _is_store_model(model):
        return asset_path(model)
    if _looks_like_hub_id(model) and not _exists(model):
        # A hub id (CHATLAB_MODEL=org/name): its snapshot folder in the Hugging Face cache,
        # downloaded once when the hub is reachable; offline, only what the cache holds.
        model = local_model(model)
    if _exists(str(Path(model) / "config.json")):  # OSError-safe: a 100k-character name is no path
        return Path(model).resolve()
    chat = [a.name for a in ASSETS.values() if a.kind == "chat-model"]
    raise UnknownNameError("model to export", model[:80], chat + ["a local Hugging Face model folder"])


def source_key(model: str) -> str:
    """The cache key of a source: a store name as is (the store pins its bytes by sha256); a
    local folder by its name, resolved path and the size and mtime of its files (cheap, and it
    changes when the folder is moved or its files are rewritten)."""
    if _is_store_model(model):
        return model
    src = source_folder(model)
    # a hub snapshot's folder is named by its commit; the hub id is the readable name
    name = model.replace("/", "--") if src.parent.name == "snapshots" else src.name
    digest = hashlib.sha256(str(src).encode())
    for f in sorted(src.iterdir()):
        if f.is_file():
            st = f.stat()
            digest.update(f"\0{f.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return f"{name}-{digest.hexdigest()[:12]}"


def export_root() -> Path:
    return chatlab_home() / "openvino"


def export_dir(model: str, weight_format: str, stateful: bool = True) -> Path:
    return export_root() / source_key(model) / (weight_format if stateful else f"{weight_format}-stateless")


def lock_path(final: Path) -> Path:
    """Lock files live apart from the exports, so an export's folder holds only the export."""
    return final.parent.parent / ".locks" / f"{final.parent.name}-{final.name}.lock"


@contextmanager
def export_lock(final: Path, blocking: bool = True) -> Iterator[bool]:
    """Hold the export's lock (yields False if `blocking` is off and someone else holds it).
    flock is released by the kernel when its holder dies, even on SIGKILL."""
    path = lock_path(final)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                yield False
                return
            print(f"chatlab: waiting for another process exporting {final} ...", file=sys.stderr,
                  flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sweep_partials() -> list[Path]:
    """Remove the partial folders of dead exports (their lock is free); return what went."""
    removed = []
    for partial in sorted(export_root().glob(f"*/{PARTIAL}*")):
        final = partial.with_name(partial.name[len(PARTIAL):])
        with export_lock(final, blocking=False) as ours:
            if ours and partial.exists():
                shutil.rmtree(partial, ignore_errors=True)
                removed.append(partial)
    return removed


def int4_group_size(folder: Path) -> int:
    """The largest usual group size dividing the layer widths (SmolLM2's 576 needs 64)."""
    config = json.loads((folder / "config.json").read_text())
    widths = [config.get("hidden_size"), config.get("intermediate_size")]
    for group in (128, 64, 32):
        if all(isinstance(w, int) and w % group == 0 for w in widths):
            return group
    return -1  # per-channel


def cli_args(src: Path, weight_format: str, out: Path, stateful: bool = True,
             python: str | None = None) -> list[str]:
    """optimum-cli's command line; `python` defaults to export_env's choice: this Python, or an
    isolated one where optimum-intel cannot run beside this Python's transformers (Colab)."""
    args = [python or export_python(), "-m", "optimum.commands.optimum_cli", "export", "openvino",
            "--model", str(src), "--task", "text-generation-with-past",
            "--weight-format", weight_format]
    if not stateful:
        args.append("--disable-stateful")
    if weight_format == "int4":
        args += ["--group-size", str(int4_group_size(src)), "--ratio", "1.0"]
    return args + [str(out)]


def is_exported(folder: Path) -> bool:
    try:
        data = json.loads((folder / EXPORT_MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return data.get("export_version") == EXPORT_VERSION and (folder / "openvino_model.xml").is_file()


def export_model(model: str = "smollm2-135m-instruct", weight_format: str = "int8",
                 force: bool = False, stateful: bool = True) -> Path:
    """The cached export folder, building it first when it is missing (or `force`)."""
    if weight_format not in WEIGHT_FORMATS:
        raise UnknownNameError("weight format", weight_format, WEIGHT_FORMATS)
    final = export_dir(model, weight_format, stateful)
    if is_exported(final) and not force:
        return final
    sweep_partials()
    with export_lock(final):
        if is_exported(final) and not force:  # another process built it while we waited
            return final
        src = source_folder(model)
        print(f"chatlab: exporting {model} to OpenVINO {weight_format} (once; about half a minute "
              f"on 2 cores) into {final}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        partial = final.with_name(PARTIAL + final.name)
        shutil.rmtree(partial, ignore_errors=True)  # we hold the lock: a leftover is dead
        partial.mkdir(parents=True)
        try:
            args = (cli_args(src, weight_format, partial) if stateful  # the usual call, unchanged
                    else cli_args(src, weight_format, partial, stateful=False))
            run_cli(args, f"export {Path(model).name} {final.name}", partial)
            verify(partial, stateful)
            (partial / EXPORT_MANIFEST).write_text(json.dumps({
                "model": model, "weight_format": weight_format, "stateful": stateful, "source": str(src),
                "export_version": EXPORT_VERSION, "seconds": round(time.perf_counter() - t0, 1)},
                indent=2))
            if final.exists():  # stale (old recipe) or forced: replaced only by a complete one
                shutil.rmtree(final)
            os.replace(partial, final)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return final


def verify(folder: Path, stateful: bool = True) -> None:
    """Refuse an export that OpenVINO cannot read or whose KV cache is not where it should be:
    inside the model as state (stateful) or exposed as `past_key_values.*` inputs (stateless)."""
    import openvino as ov

    xml = folder / "openvino_model.xml"
    if not xml.is_file():
        raise ChatlabError(f"the export wrote no {xml.name}; rerun with `chatlab export --force`")
    model = ov.Core().read_model(xml)
    names = {i.get_any_name() for i in model.inputs}
    if not stateful:
        if model.get_variables() or not any(n.startswith("past_key_values") for n in names):
            raise ChatlabError("the stateless export has no past_key_values inputs; rerun with "
                               "`export_model(..., stateful=False, force=True)`")
        return
    if "beam_idx" not in names or not model.get_variables():
        raise ChatlabError("the export is not stateful (no KV-cache state); it cannot be used "
                           "by chatlab's OpenVINO loop")
