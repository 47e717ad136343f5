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
from libraries that ship no type information.
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

__all__ = ["Decoder", "Embedding", "GenaiConfig", "GenaiHandle", "GenaiPipeline", "GoValue",
           "Graded", "HFCache", "HFModel", "HFTokenizer", "Jsonable", "LoaderOption", "OVCompiled",
           "OVModel", "OVPort", "OVRequest", "OVTensor", "Processor", "PydanticField", "Widget"]
