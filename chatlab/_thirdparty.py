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
- Jsonable: decoded JSON (a dict, list, str, number, bool or None): a request body, a
  response, a report or a manifest. A recursive union would need a cast at every read of a
  field, so the wire's JSON stays unchecked and is checked by chatlab.types' parse rules.
- LoaderOption: the value of one backend loader option (chatlab.backends.registry's Option:
  threads, attention, cache_gb, ...), carried in **options from the CLI or a caller to the
  loader that names it with its own type; mypy cannot match a **dict's values to each typed
  keyword, so the seam between the table and the loaders is unchecked (the table checks names).
- PydanticField: what pydantic.Field(...) returns; pydantic types it Any on purpose, so that a
  field's default fits whatever the field is annotated with.
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
LoaderOption = Any
PydanticField = Any

__all__ = ["GenaiConfig", "GenaiHandle", "GenaiPipeline", "HFModel", "HFTokenizer", "Jsonable", "LoaderOption",
           "OVCompiled", "OVModel", "OVRequest", "Processor", "PydanticField", "Widget"]
