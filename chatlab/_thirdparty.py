"""The objects chatlab holds from libraries that give the type checker nothing to check (or
types it cannot use), named once. Each alias is `Any` to mypy; the name says what the value
really is, so a signature reads `tokenizer: HFTokenizer`, not `tokenizer: Any`.

Why each is untyped:
- HFTokenizer: a transformers tokenizer, or one of chatlab's stand-ins that quack like one
  (ChatGLM3's, Qwen-1's, tiktoken's wrapper); no common base class covers them all.
- HFModel: a transformers causal LM; transformers' `generate` is declared on a mixin whose self
  type mypy cannot bind (an error inside transformers' annotations, not in chatlab's call).
- OVModel, OVCompiled, OVRequest: openvino's Model, CompiledModel and InferRequest (openvino ships
  no type information).
- GenaiPipeline, GenaiConfig, GenaiHandle: openvino-genai's ContinuousBatchingPipeline, its
  GenerationConfig and a request's GenerationHandle (no type information).
- Processor: a logits processor of chatlab's loop or genai's structured-output config: what a
  token source takes to enforce a grammar (xgrammar's objects inside carry no types).
- Widget: an ipywidgets widget (no type information).
- Jsonable: decoded JSON (a dict, list, str, number, bool or None).
"""
from __future__ import annotations

from typing import Any

HFTokenizer = Any
HFModel = Any
OVModel = Any
OVCompiled = Any
OVRequest = Any
GenaiPipeline = Any
GenaiConfig = Any
GenaiHandle = Any
Processor = Any
Widget = Any
Jsonable = Any

__all__ = ["GenaiConfig", "GenaiHandle", "GenaiPipeline", "HFModel", "HFTokenizer", "Jsonable", "OVCompiled",
           "OVModel", "OVRequest", "Processor", "Widget"]
