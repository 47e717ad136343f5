"""The objects chatlab holds from libraries that give mypy nothing usable to check, named once.

Each alias is `Any` to mypy; the name says what the value is (`tokenizer: HFTokenizer`). HFTokenizer
covers transformers' tokenizers and chatlab's stand-ins, which share no base class; HFModel's
`generate` is declared on a mixin mypy cannot bind; Jsonable is decoded JSON of an open shape;
LoaderOption is one backend option carried in **options; GoValue a value in the Go-template
evaluator; Graded an exercise's return. The rest come from libraries without type information.
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
