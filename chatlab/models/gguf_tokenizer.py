"""Build a Hugging Face tokenizer from a GGUF file's own metadata.

Why by hand: transformers converts these GGUFs into the wrong tokenizer (SmolLM2 gets the wrong
eos and an added BOS; Qwen2.5 loses added tokens, so the tool-call tag splits into pieces). The
metadata holds everything needed; we rebuild a byte-level BPE with the pre-tokenizer llama.cpp
names in `tokenizer.ggml.pre`, and every CONTROL / USER_DEFINED token as one special id.
"""
from __future__ import annotations

from pathlib import Path

from chatlab._thirdparty import Jsonable
from chatlab.errors import AssetError

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
