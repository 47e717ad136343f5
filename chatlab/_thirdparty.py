"""The objects chatlab holds from libraries that give the type checker nothing to check (or
types it cannot use), named once. Each alias is `Any` to mypy; the name says what the value
really is, so a signature reads `tokenizer: HFTokenizer`, not `tokenizer: Any`.

Why each is untyped:
- HFTokenizer: a transformers tokenizer, or one of chatlab's stand-ins that quack like one
  (ChatGLM3's, Qwen-1's, tiktoken's wrapper); no common base class covers them all.
- HFCache: the KV cache a transformers model returns (a DynamicCache, or None before the
  first forward), held by TorchBackend between calls and only handed back to the model.
- Decoder: what the loop's detokenizer calls `.decode(ids, skip_special_tokens=...)` on: the
  `tokenizers` library's Tokenizer read from tokenizer.json (no type information), or an
  HFTokenizer when a backend has nothing lighter.
- Embedding: a llama-index embedding model (llama_index: no type information here).
- HFModel: a transformers causal LM; transformers' `generate` is declared on a mixin whose self
  type mypy cannot bind (an error inside transformers' annotations, not in chatlab's call).
- OVModel, OVCompiled, OVRequest, OVPort, OVTensor: openvino's Model, CompiledModel,
  InferRequest, a graph input/output (Output/ConstOutput) and Tensor (openvino ships no type
  information).
- GenaiPipeline, GenaiConfig, GenaiHandle: openvino-genai's ContinuousBatchingPipeline, its
  GenerationConfig and a request's GenerationHandle (no type information).
- Processor: a logits processor of chatlab's loop or genai's structured-output config: what a
  token source takes to enforce a grammar (xgrammar's objects inside carry no types).
- Widget: an ipywidgets widget (no type information).
- Jsonable: decoded JSON (a dict, list, str, number, bool or None) whose shape is open: a
  request body before parsing, a tool's JSON Schema or call arguments, a report or a manifest.
  A recursive union would need a cast at every read of a field, so such JSON stays unchecked
  and is checked by chatlab.types' parse rules. The responses chatlab sends have fixed shapes
  and are typed (chatlab.types.responses).
- LoaderOption: the value of one backend loader option (chatlab.backends.registry's Option:
  threads, attention, cache_gb, ...), carried in **options from the CLI or a caller to the
  loader that names it with its own type; mypy cannot match a **dict's values to each typed
  keyword, so the seam between the table and the loaders is unchecked (the table checks names).
- GoValue: a value inside chatlab's evaluator of Ollama's Go templates (chatlab.render.io.goeval):
  a string, number, bool, slice, map or struct whose kind Go's text/template checks at run time,
  and so does the evaluator, kind by kind; a parsed template node holds text or an expression.
- Graded: what a learner's exercise function returned (chatlab.lab.exercises): whatever their
  code makes; each exercise's `same` unpacks it inside a try (exercises._safe_same), so a value
  of the wrong shape is a failed case, not a type error.
- PydanticField: what pydantic.Field(...) returns; pydantic types it Any on purpose, so that a
  field's default fits whatever the field is annotated with.
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
