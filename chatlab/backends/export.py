"""`chatlab export`: a model of the store → a cached OpenVINO folder (fp32, int8 or int4), made by
optimum-cli in a child process, under a lock, into `.partial-<format>` renamed once complete; run
by CHATLAB_EXPORT_PYTHON, this Python, or an isolated venv (optimum-intel caps Colab's packages)."""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chatlab.backends.child import run_cli
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.models import asset_path, chatlab_home, local_model
from chatlab.models.assets import names_of
from chatlab.models.cache import read_json
from chatlab.models.hub import _exists, _looks_like_hub_id

WEIGHT_FORMATS = ["fp32", "int8", "int4"]
EXPORT_MANIFEST = "chatlab-export.json"
EXPORT_VERSION = 1  # bump when the export recipe changes, so old cache entries are rebuilt
PARTIAL = ".partial-"  # prefix of an export being written


def source_folder(model: str) -> Path:
    """The HF folder to export: a store asset (converted on first use) or a local folder."""
    if model in names_of("chat-model"):
        return asset_path(model)
    if _looks_like_hub_id(model) and not _exists(model):
        model = local_model(model)  # a hub id: its snapshot folder in the Hugging Face cache
    if _exists(str(Path(model) / "config.json")):  # OSError-safe: a 100k-character name is no path
        return Path(model).resolve()
    raise UnknownNameError("model to export", model[:80],
                           names_of("chat-model") + ["a local Hugging Face model folder"])


def source_key(model: str) -> str:
    """The cache key of a source: a store name, or a folder's name, path and files' sizes and mtimes."""
    if model in names_of("chat-model"):
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
    """Hold the export's lock (False: not `blocking`, and someone else holds it)."""
    path = lock_path(final)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                yield False
                return
            print(f"chatlab: waiting for another process exporting {final} ...", file=sys.stderr, flush=True)
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


def cli_args(src: Path, weight_format: str, out: Path, stateful: bool = True) -> list[str]:
    args = [export_python(), "-m", "optimum.commands.optimum_cli", "export", "openvino",
            "--model", str(src), "--task", "text-generation-with-past",
            "--weight-format", weight_format]
    if not stateful:
        args.append("--disable-stateful")
    if weight_format == "int4":
        args += ["--group-size", str(int4_group_size(src)), "--ratio", "1.0"]
    return args + [str(out)]


def is_exported(folder: Path) -> bool:
    return (read_json(folder / EXPORT_MANIFEST, export_version=EXPORT_VERSION) is not None
            and (folder / "openvino_model.xml").is_file())


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
            label = f"export {Path(model).name} {final.name}"
            run_cli(cli_args(src, weight_format, partial, stateful), label, partial)
            verify(partial, stateful)
            (partial / EXPORT_MANIFEST).write_text(json.dumps({
                "model": model, "weight_format": weight_format, "stateful": stateful, "source": str(src),
                "export_version": EXPORT_VERSION, "seconds": round(time.perf_counter() - t0, 1)}, indent=2))
            if final.exists():  # stale (old recipe) or forced: replaced only by a complete one
                shutil.rmtree(final)
            os.replace(partial, final)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return final


def verify(folder: Path, stateful: bool = True) -> None:
    """Refuse an export OpenVINO cannot read or whose KV cache is not where it should be."""
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


# installed in the venv at the lock's versions; the rest comes from this Python's packages
EXPORT_STACK = ["optimum-intel", "optimum", "nncf", "transformers", "huggingface-hub"]
STAMP = ".chatlab-export-env"


def unmet(distribution: str = "optimum-intel") -> list[str]:
    """The export stack's requirements this Python does not meet ([]: the export runs here)."""
    from packaging.requirements import Requirement

    problems = []
    for name in [distribution] + [n for n in EXPORT_STACK if n != distribution]:
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra, or another platform
            try:
                have = md.version(req.name)
            except md.PackageNotFoundError:
                problems.append(f"{name} needs {req}, not installed")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                problems.append(f"{name} needs {req}, this Python has {have}")
    return problems


def lock_pins() -> dict[str, str]:
    """The lock's pins (this Python's own lock file where there is one), from the repository."""
    folder = Path(__file__).resolve().parents[2] / "requirements"
    if not (folder / "lock.txt").is_file():
        raise ChatlabError(f"no requirements/lock.txt beside chatlab ({folder}): the isolated export "
                           "environment is built from the repository's lock; use an editable "
                           "checkout, or set CHATLAB_EXPORT_PYTHON to a Python that has optimum-intel")
    lock = folder / f"lock-py{sys.version_info[0]}{sys.version_info[1]}.txt"
    text = (lock if lock.is_file() else folder / "lock.txt").read_text()
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", text, re.M)}


def build_commands(env: Path, pins: dict[str, str], constraints_file: Path) -> list[list[str]]:
    py = str(env / "bin" / "python")
    return [[sys.executable, "-m", "venv", str(env)],
            [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(constraints_file),
             *(f"{n}=={pins[n]}" for n in EXPORT_STACK)]]


def see_kernel_sites(env: Path) -> None:
    """After its own site-packages, the venv's Python searches this Python's (Colab's: the system's)."""
    own = sorted(env.glob("lib/python*/site-packages"))
    if not own:
        raise ChatlabError(f"the export environment {env} has no site-packages folder")
    folders = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    (own[0] / "_chatlab_kernel_site.pth").write_text("".join(f + "\n" for f in folders if os.path.isdir(f)))


def ensure_env(run: object = subprocess.run) -> Path:
    """The isolated export Python, built first when missing or incomplete."""
    pins = lock_pins()  # the venv is named by this Python's version and the pins' digest
    digest = hashlib.sha256(repr(sorted(pins.items())).encode()).hexdigest()[:12]
    env = chatlab_home() / "export-env" / f"py{sys.version_info[0]}{sys.version_info[1]}-{digest}"
    python = env / "bin" / "python"
    if (env / STAMP).is_file() and python.is_file():
        return python
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.parent / f".{env.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel even if we are killed
        if (env / STAMP).is_file() and python.is_file():
            return python  # another process built it while we waited
        shutil.rmtree(env, ignore_errors=True)  # an interrupted build: start over
        print(f"chatlab: building the export environment {env} (once: optimum-intel and the "
              "transformers it supports, beside this Python's own packages)", file=sys.stderr, flush=True)
        constraints_file = env.parent / f".{env.name}-constraints.txt"
        constraints_file.write_text("".join(f"{n}=={pins[n]}\n" for n in EXPORT_STACK))
        try:
            for i, step in enumerate(build_commands(env, pins, constraints_file)):
                if i == 1:  # the venv exists: let it see this Python's packages before pip runs
                    see_kernel_sites(env)
                proc = run(step, capture_output=True, text=True)  # type: ignore[operator]
                if proc.returncode:
                    tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-6:])
                    raise ChatlabError(f"could not build the export environment ({' '.join(step[:4])} ...):"
                                       f"\n{tail}\ncheck the network to the package index, then export "
                                       "again (the environment is rebuilt from scratch)")
        except BaseException:
            shutil.rmtree(env, ignore_errors=True)
            raise
        finally:
            constraints_file.unlink(missing_ok=True)
        (env / STAMP).write_text(" ".join(f"{n}=={pins[n]}" for n in EXPORT_STACK) + "\n")
    return python


def export_python() -> str:
    """The Python that runs optimum-cli (see the module docstring for the order)."""
    if chosen := os.environ.get("CHATLAB_EXPORT_PYTHON", "").strip():
        return chosen
    if not unmet():
        return sys.executable
    return str(ensure_env())
