"""The objects chatlab holds from libraries that give mypy nothing to check, named once (each alias is
`Any` to mypy; its name says what the value is); and which kind of tokenizer a value is, told once."""
from __future__ import annotations

from typing import Any

HFTokenizer = Any
HFModel = Any
HFCache = Any
Decoder = Any
Embedding = Any
OVModel = Any
OVCompiled = Any
OVRequest = Any
OVPort = Any
OVTensor = Any
GenaiPipeline = Any
GenaiConfig = Any
GenaiHandle = Any
Processor = Any
Jsonable = Any
LoaderOption = Any
PydanticField = Any
Graded = Any
GoValue = Any


def tokenizer_kind(tokenizer: HFTokenizer) -> str | None:
    """"tiktoken" (chatlab's Qwen-1), "fast" (Rust `tokenizers`), "sentencepiece" (a slow one holding a
    SentencePiece processor: ChatGLM's), "slow" (another Hugging Face Python tokenizer), or None."""
    if hasattr(tokenizer, "enc"):
        return "tiktoken"
    if hasattr(tokenizer, "backend_tokenizer"):
        return "fast"
    if hasattr(getattr(tokenizer, "tokenizer", None), "sp_model"):
        return "sentencepiece"
    return "slow" if hasattr(tokenizer, "_tokenize") else None


def piece_spelling(tokenizer: Decoder) -> str:
    """How a token's piece spells its bytes: "bytelevel" ("Ġ"), "sentencepiece" ("▁") or "decode"."""
    raw = getattr(tokenizer, "backend_tokenizer", None) or tokenizer
    decoder = repr(getattr(raw, "decoder", None) or "")
    if "ByteLevel" in decoder:
        return "bytelevel"
    if tokenizer_kind(tokenizer) == "sentencepiece" or hasattr(tokenizer, "sp_model") or \
            "Metaspace" in decoder or "ByteFallback" in decoder:
        return "sentencepiece"
    return "decode"
