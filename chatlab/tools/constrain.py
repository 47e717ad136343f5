"""Constrained decoding with xgrammar: forced calls and JSON answers that always parse.

    proc = build_processor(tokenizer, vocab_size, tools, tool_choice, response_format, fmt)
    generate(backend, ids, params, logits_processor=proc)     # proc is None: nothing to force

Before each sampled token the processor sets the logits of every token the grammar forbids to
-inf; after it, the matcher accepts the token. Once the grammar is complete only a stop token
is allowed, and accepting it terminates the matcher (the loop then finishes with "stop").
What is forced:
  - tool_choice naming a tool: exactly one call to it, arguments valid for its schema;
  - tool_choice "required": exactly one call to one of the tools;
  - response_format json_object / json_schema: a JSON object / JSON matching the schema;
  - tool_choice "auto" (hermes, react): free text, but once the model writes the call opener
    (`<tool_call>`, `Action: `) the rest of the call is constrained (a lazy trigger).
"""
from __future__ import annotations

from typing import Any

from chatlab.errors import ChatlabError
from chatlab.tools.grammars import forced_structure, lazy_structure
from chatlab.tools.schema import check_schema, validate_tool_choice, validate_tools

_COMPILERS: dict[tuple, tuple[Any, Any]] = {}


def compiler_for(tokenizer: Any, vocab_size: int, stop_ids: list[int] | None = None) -> Any:
    """One xgrammar GrammarCompiler per tokenizer (building the token table takes ~1 s)."""
    import xgrammar as xgr

    key = (id(tokenizer), vocab_size, tuple(stop_ids or ()))
    if key not in _COMPILERS:
        if hasattr(tokenizer, "enc"):   # chatlab's tiktoken Qwen-1 tokenizer: raw byte tokens
            vocab = [tokenizer.enc.decode_single_token_bytes(i) for i in range(tokenizer.enc.n_vocab)]
            info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=vocab_size,
                                     stop_token_ids=stop_ids or [tokenizer.eos_token_id])
        else:
            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                      stop_token_ids=stop_ids or None)
        # keep the tokenizer alive with its entry, so its id() cannot be reused by another
        _COMPILERS[key] = (tokenizer, xgr.GrammarCompiler(info, max_threads=2))
    return _COMPILERS[key][1]


class GrammarProcessor:
    """The logits_processor of chatlab.generate: mask(logits), accept(token), is_terminated()."""

    def __init__(self, compiled: Any, vocab_size: int, description: str) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.vocab_size = vocab_size
        self.description = description
        self.rejected: list[int] = []    # tokens the matcher refused (only if masking was skipped)

    def mask(self, logits: Any) -> Any:
        import numpy as np
        import torch

        if isinstance(logits, np.ndarray) and not logits.flags.writeable:
            logits = logits.copy()
        tensor = logits if isinstance(logits, torch.Tensor) else torch.from_numpy(logits)
        self.matcher.fill_next_token_bitmask(self.bitmask)
        self.xgr.apply_token_bitmask_inplace(tensor, self.bitmask[0], vocab_size=self.vocab_size)
        tensor[self.vocab_size:] = float("-inf")    # padded rows of lm_head are never valid
        return logits

    def accept(self, token_id: int) -> None:
        if not self.matcher.accept_token(int(token_id)):
            self.rejected.append(int(token_id))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def __repr__(self) -> str:
        return f"GrammarProcessor({self.description})"


def response_schema(response_format: Any) -> dict | None:
    """The JSON schema an OpenAI response_format asks for (None for text/absent)."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in (None, "text") and isinstance(response_format, dict):
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ChatlabError("response_format json_schema needs {\"json_schema\": {\"name\": ..., "
                               "\"schema\": {...}}}")
        try:
            check_schema(schema)
        except ChatlabError as e:
            raise ChatlabError(f"response_format has an invalid JSON schema: {e}; fix the schema") from None
        return schema
    raise ChatlabError(f"response_format {response_format!r} is not understood; use "
                       '{"type": "text"}, {"type": "json_object"} or {"type": "json_schema", ...}')


def build_processor(tokenizer: Any, vocab_size: int, tools: Any = None, tool_choice: Any = None,
                    response_format: Any = None, fmt: str | None = "hermes",
                    stop_ids: list[int] | None = None, lazy: bool = True) -> GrammarProcessor | None:
    """A processor forcing what the request asks for, or None when nothing is forced.

    A forced call wins over response_format (the call's arguments are the structured output).
    `stop_ids` are the tokens that may end the output (default: the tokenizer's eos).
    """
    fns = validate_tools(tools)
    choice = validate_tool_choice(tool_choice, tools)
    schema = response_schema(response_format)
    structure, what = None, ""
    if choice.mode == "named" or (choice.mode == "required" and fns):
        chosen = [f for f in fns if choice.mode != "named" or f["name"] == choice.name]
        structure, what = forced_structure(fmt or "hermes", chosen), f"{fmt} call: {choice.mode}"
    elif schema is None and choice.mode == "auto" and fns and lazy and fmt:
        structure, what = lazy_structure(fmt, fns), f"{fmt} call when triggered"
    compiler = None
    if structure is not None:
        compiler = compiler_for(tokenizer, vocab_size, stop_ids)
        compiled = compiler.compile_structural_tag({"type": "structural_tag", "format": structure})
    elif schema is not None:
        compiler = compiler_for(tokenizer, vocab_size, stop_ids)
        strict = response_format.get("type") == "json_schema"
        compiled = compiler.compile_json_schema(schema, any_whitespace=False, strict_mode=strict)
        what = "json_schema" if strict else "json_object"
    if compiler is None:
        return None
    return GrammarProcessor(compiled, vocab_size, what)


def compile_constraint(tokenizer: Any, vocab_size: int, *, tools: Any, choice: Any,
                       response_format: Any, fmt: Any, stop_ids: list[int] | None) -> None:
    """Build the processor once so that a grammar that cannot compile is refused up front."""
    rf = None
    if response_format is not None:
        rf = ({"type": "json_object"} if response_format.kind == "json_object" else
              {"type": "json_schema", "json_schema": {"schema": response_format.schema}})
    build_processor(tokenizer, vocab_size, tools=[t.to_openai() for t in tools] or None,
                    tool_choice=choice.name if choice.mode == "named" else choice.mode,
                    response_format=rf, fmt=fmt, stop_ids=stop_ids or None)
