"""The objects chatlab holds from libraries that give mypy nothing usable to check, named once.

Each alias is `Any` to mypy; the name says what the value is (`tokenizer: HFTokenizer`). HFTokenizer
covers transformers' tokenizers and chatlab's stand-ins, which share no base class; HFModel's
`generate` is declared on a mixin mypy cannot bind; Jsonable is decoded JSON of an open shape;
LoaderOption is one backend option carried in **options; GoValue a value in the Go-template
evaluator; Graded an exercise's return; PydanticField what pydantic types Field(...). The rest come
from libraries without type information. Which kind of tokenizer a value is, is told here too
(`tokenizer_kind`, `piece_spelling`), once for every floor that needs it.
"""
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
Widget = Any
Jsonable = Any
LoaderOption = Any
PydanticField = Any
Graded = Any
GoValue = Any


def tokenizer_kind(tokenizer: HFTokenizer) -> str | None:
    """What a tokenizer is, told in this one place (the renderer's Encoder, the logprob token
    texts, the grammar compiler and the prompt bound all ask here): "tiktoken" (chatlab's Qwen-1,
    raw byte tokens over a tiktoken encoding), "fast" (Hugging Face over the Rust `tokenizers`),
    "sentencepiece" (a slow tokenizer holding its SentencePiece processor one level down:
    ChatGLM's), "slow" (another Hugging Face Python tokenizer); None: none of these."""
    if hasattr(tokenizer, "enc"):
        return "tiktoken"
    if hasattr(tokenizer, "backend_tokenizer"):
        return "fast"
    if hasattr(getattr(tokenizer, "tokenizer", None), "sp_model"):
        return "sentencepiece"
    return "slow" if hasattr(tokenizer, "_tokenize") else None


def piece_spelling(tokenizer: Decoder) -> str:
    """How a token's piece spells its bytes: "bytelevel" (GPT-2's printable stand-ins, "Ġ" for a
    space: SmolLM2, Qwen), "sentencepiece" ("▁" for a space, "<0xE2>" for a raw byte), or
    "decode" (neither: the id is decoded alone). `tokenizer` may be a bare `tokenizers.Tokenizer`."""
    raw = getattr(tokenizer, "backend_tokenizer", None) or tokenizer
    decoder = repr(getattr(raw, "decoder", None) or "")
    if "ByteLevel" in decoder:
        return "bytelevel"
    if tokenizer_kind(tokenizer) == "sentencepiece" or hasattr(tokenizer, "sp_model") or \
            "Metaspace" in decoder or "ByteFallback" in decoder:
        return "sentencepiece"
    return "decode"

__all__ = ["Decoder", "Embedding", "GenaiConfig", "GenaiHandle", "GenaiPipeline", "GoValue",
           "Graded", "HFCache", "HFModel", "HFTokenizer", "Jsonable", "LoaderOption", "OVCompiled",
           "OVModel", "OVPort", "OVRequest", "OVTensor", "Processor", "PydanticField", "Widget",
           "piece_spelling", "tokenizer_kind"]
