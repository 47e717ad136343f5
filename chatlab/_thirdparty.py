"""The objects chatlab holds from libraries that give mypy nothing usable to check, named once.

Each alias is `Any` to mypy; the name says what the value really is, so a signature reads
`tokenizer: HFTokenizer`, not `tokenizer: Any`. Why some are untyped even so:
- HFTokenizer: a transformers tokenizer or one of chatlab's stand-ins (ChatGLM3's, Qwen-1's,
  tiktoken's wrapper); no common base class covers them all.
- HFModel: transformers' `generate` is declared on a mixin whose self type mypy cannot bind.
- Jsonable: decoded JSON of an open shape (a request body before parsing, a tool's schema); a
  recursive union would need a cast at every read, so chatlab.types' parse rules check it.
- LoaderOption: one backend loader option, carried in **options; mypy cannot match a **dict's
  values to each typed keyword (the registry checks the names).
- GoValue: a value in chatlab's evaluator of Ollama's Go templates, kind-checked at run time.
- Graded: what a learner's exercise function returned; checked inside a try by its exercise.
- PydanticField: pydantic types Field(...) Any on purpose.
The rest (openvino, openvino-genai, tokenizers, llama-index, ipywidgets, xgrammar objects) come
from libraries that ship no type information. Which kind of tokenizer a value is, is told here too
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
