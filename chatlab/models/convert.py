"""Convert a shipped GGUF into a standard Hugging Face folder, then prove it works.

transformers dequantizes the weights, but builds the wrong tokenizer for these files (SmolLM2's
eos, Qwen2.5's added tokens), so the tokenizer is rebuilt from the GGUF metadata: byte-level BPE
with llama.cpp's pre-tokenizer, every CONTROL / USER_DEFINED token one special id. Before the
folder goes into place: a text round-trip, one id per control token, and "Paris".
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from chatlab._thirdparty import HFModel, Jsonable
from chatlab.errors import AssetError
from chatlab.models.assets import Asset

CONTROL, USER_DEFINED = 3, 4

# llama.cpp's pre-tokenizer regexes for the two vocabularies we ship (llama-vocab.cpp).
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def read_metadata(gguf_path: Path) -> dict[str, Jsonable]:
    """The tokenizer.* fields of a GGUF file as plain Python values."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(gguf_path))
    except Exception as err:  # gguf raises ValueError/struct errors on a damaged file
        raise AssetError(f"{gguf_path} is not a readable GGUF file ({err}); reinstall it") from err
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith(("tokenizer.", "general.name", "general.architecture")):
            meta[key] = field.contents()
    if "tokenizer.ggml.tokens" not in meta:
        raise AssetError(f"{gguf_path} has no tokenizer metadata; it cannot be served as chat")
    return meta


def _pre_tokenizer(pre: str):  # noqa: ANN202 - tokenizers types are untyped
    from tokenizers import Regex, pre_tokenizers

    if pre not in ("qwen2", "smollm", "starcoder", "refact", "gpt2"):
        raise AssetError(f"GGUF pre-tokenizer {pre!r} is not supported; "
                         "supported: qwen2, smollm, gpt2")
    # SmolLM splits every digit on its own before the GPT-2 regex.
    steps = [] if pre in ("qwen2", "gpt2") else [pre_tokenizers.Digits(individual_digits=True)]
    split = QWEN2_SPLIT if pre == "qwen2" else GPT2_SPLIT
    return pre_tokenizers.Sequence([
        *steps, pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def build_tokenizer(meta: dict[str, Jsonable]):  # noqa: ANN201 - returns PreTrainedTokenizerFast
    """A PreTrainedTokenizerFast equal to the one the GGUF was made from."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise AssetError("only byte-level BPE GGUF tokenizers (tokenizer.ggml.model 'gpt2') are supported")
    # PreTrainedTokenizerFast and the post-processor below add no BOS
    if meta.get("tokenizer.ggml.add_bos_token"):
        raise AssetError("GGUF tokenizers that add a BOS are not supported by this converter")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta["tokenizer.ggml.token_type"])
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    model = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(model)
    tok.pre_tokenizer = _pre_tokenizer(meta.get("tokenizer.ggml.pre", "gpt2"))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Control and user-defined tokens must match whole and never be split by BPE.
    specials = [AddedToken(tokens[i], special=True, normalized=False)
                for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
    tok.add_special_tokens(specials)

    def name(key: str) -> str | None:
        idx = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[int(idx)] if idx is not None and int(idx) < len(tokens) else None

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=name("bos"),
        eos_token=name("eos"),
        unk_token=name("unknown"),
        pad_token=name("padding") or name("eos"),
        chat_template=meta.get("tokenizer.chat_template"),
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )


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
