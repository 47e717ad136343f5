"""Convert a shipped GGUF into a standard Hugging Face folder, then prove it works.

Weights: transformers dequantizes the GGUF tensors (needs `gguf`); its GGUF *tokenizer* is
wrong for these files (see gguf_tokenizer.py), so the tokenizer is rebuilt from metadata.
Verification before the folder is renamed into place: a text round-trip, each control token
encodes to exactly one id, and a greedy chat answer to a factual question.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from chatlab._thirdparty import HFModel
from chatlab.errors import AssetError
from chatlab.models.assets import Asset
from chatlab.models.gguf_tokenizer import build_tokenizer, read_metadata

ROUND_TRIP = "Hello, world! 1234 naïve café — 你好 🙂\n\tindented  twice"
PROBE_QUESTION = "What is the capital of France?"


def _single_gguf(paths: list[Path], work: Path) -> Path:
    """One GGUF file: the file itself, or the parts concatenated into `work`."""
    if len(paths) == 1:
        return paths[0]
    joined = work / "model.gguf"
    with open(joined, "wb") as out:
        for p in paths:
            with open(p, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 22)
    return joined


def convert_gguf(asset: Asset, paths: list[Path], out: Path) -> None:
    from tqdm.auto import tqdm

    steps = tqdm(total=4, desc=f"building {asset.name}", unit="step")
    # Scratch space (the concatenated parts) lives inside `out`, the build's temporary folder, so
    # a killed build leaves one folder for the store's sweep to remove, not a second one.
    with tempfile.TemporaryDirectory(dir=out, prefix=".work-") as work:
        gguf = _single_gguf(paths, Path(work))
        steps.set_postfix_str("tokenizer from GGUF metadata")
        tokenizer = build_tokenizer(read_metadata(gguf))
        steps.update()

        steps.set_postfix_str("dequantizing weights")
        from transformers import AutoModelForCausalLM, GenerationConfig

        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        steps.update()
    steps.set_postfix_str("saving")
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    model.generation_config = GenerationConfig(**ids)
    for key, value in ids.items():
        setattr(model.config, key, value)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    steps.update()
    steps.set_postfix_str("verifying")
    verify_folder(out)
    steps.update()
    steps.close()


def verify_folder(folder: Path) -> dict[str, object]:
    """Reload the folder with plain transformers and check tokenizer and model behaviour."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok.encode(ROUND_TRIP, add_special_tokens=False)
    if tok.decode(ids) != ROUND_TRIP:
        raise AssetError(f"{folder}: tokenizer does not round-trip text; delete it and rebuild")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    for token in config.get("added_tokens_decoder", {}).values():
        if token.get("special") and len(tok.encode(token["content"], add_special_tokens=False)) != 1:
            raise AssetError(f"{folder}: control token {token['content']!r} is split into pieces")
    model: HFModel = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": PROBE_QUESTION}], add_generation_prompt=True, tokenize=False)
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=24, do_sample=False)
    answer = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    if "Paris" not in answer:
        raise AssetError(f"{folder}: the converted model answered {answer!r} to "
                         f"{PROBE_QUESTION!r} (expected Paris); the conversion is broken")
    return {"answer": answer}
