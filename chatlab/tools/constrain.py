"""Constrained decoding with xgrammar: forced calls and JSON answers that always parse.

    constraint = compile_constraint(tokenizer, vocab_size, tools=tools, choice=choice,
                                    response_format=fmt_or_none, fmt=tool_format, stop_ids=ids)
    proc = build_processor(...same arguments...)     # None: nothing to force
    generate(backend, ids, params, logits_processor=proc)

Inputs are the typed values of chatlab.types, already checked by its parse_* functions; nothing
is re-validated here. What is forced:
  - a named tool_choice: exactly one call to it, arguments valid for its schema;
  - tool_choice "required": exactly one call to one of the tools;
  - response_format json_object / json_schema: a JSON object / JSON matching the schema;
  - tool_choice "auto": free text, but once the model writes the format's trigger the rest of
    the call is constrained (formats whose calls open the reply have no trigger: nothing).
A forced call wins over response_format (the call's arguments are the structured output).

`compile_constraint` is the check a server runs before queueing a request: a schema that
jsonschema accepts but xgrammar cannot compile (a dangling $ref, an empty enum, minLength above
maxLength) raises ChatlabError there, so the client gets a 400 instead of a failed stream.
Compiled grammars are cached per tokenizer and grammar, so the second compile is a lookup.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from chatlab.errors import ChatlabError
from chatlab.tools.formats.base import ToolFormat, grammar_error
from chatlab.tools.processor import GrammarProcessor
from chatlab.types import ResponseFormat, ToolChoice, ToolSpec

_COMPILERS: dict[tuple, tuple[Any, Any]] = {}
_GRAMMARS: OrderedDict[tuple, Any] = OrderedDict()
CACHE_SIZE = 64


@dataclass(frozen=True)
class Constraint:
    """A compiled grammar, shareable by any number of requests (each gets its own matcher)."""

    compiled: Any  # xgrammar.CompiledGrammar
    description: str  # e.g. "hermes call: named", "json_schema"


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


def _plan(tools: Sequence[ToolSpec], choice: ToolChoice, response_format: ResponseFormat | None,
          fmt: ToolFormat | None) -> tuple[str, Any, str] | None:
    """(kind, what to compile, description), or None when nothing is forced."""
    forced = choice.mode == "named" or (choice.mode == "required" and tools)
    if forced:
        if fmt is None:
            raise ChatlabError(f"tool_choice {choice.mode!r} needs a template with a tool-call "
                               "format to force the call in; choose one (`chatlab templates`)")
        chosen = [t for t in tools if choice.mode != "named" or t.name == choice.name]
        if not chosen:
            raise ChatlabError(f"tool_choice names {choice.name!r}, which is not among the tools; "
                               "name one of the tools sent")
        return "tag", fmt.forced_structure(chosen), f"{fmt.name} call: {choice.mode}"
    if response_format is not None:
        strict = response_format.kind == "json_schema"
        schema = response_format.schema if strict else {"type": "object"}
        return "schema", (json.dumps(schema), strict), response_format.kind
    if choice.mode == "auto" and fmt is not None:
        lazy = fmt.lazy_structure(tools)
        if lazy is not None:
            return "tag", lazy, f"{fmt.name} call when triggered"
    return None


def compile_constraint(tokenizer: Any, vocab_size: int, *, tools: Sequence[ToolSpec],
                       choice: ToolChoice, response_format: ResponseFormat | None,
                       fmt: ToolFormat | None, stop_ids: list[int] | None = None) -> Constraint | None:
    """The compiled grammar a request asks for (cached), or None when nothing is forced.

    Raises ChatlabError when a schema cannot be compiled; call it before queueing a request."""
    rf = None if response_format is None else (response_format.kind, json.dumps(response_format.schema))
    key = (id(tokenizer), vocab_size, tuple(stop_ids or ()), fmt.name if fmt else None, choice, rf,
           json.dumps([t.to_openai() for t in tools]))
    if key in _GRAMMARS:
        _GRAMMARS.move_to_end(key)
        return _GRAMMARS[key]
    plan = _plan(tools, choice, response_format, fmt)
    constraint = None if plan is None else _compile(compiler_for(tokenizer, vocab_size, stop_ids), *plan)
    _GRAMMARS[key] = constraint
    if len(_GRAMMARS) > CACHE_SIZE:
        _GRAMMARS.popitem(last=False)
    return constraint


def _compile(compiler: Any, kind: str, spec: Any, description: str) -> Constraint:
    try:
        if kind == "tag":
            compiled = compiler.compile_structural_tag({"type": "structural_tag", "format": spec})
        else:
            compiled = compiler.compile_json_schema(spec[0], any_whitespace=False, strict_mode=spec[1])
    except RuntimeError as err:
        what = "the response_format schema" if kind == "schema" else "the tools' parameter schemas"
        raise grammar_error(what, err) from None
    return Constraint(compiled, description)


def build_processor(tokenizer: Any, vocab_size: int, *, tools: Sequence[ToolSpec], choice: ToolChoice,
                    response_format: ResponseFormat | None, fmt: ToolFormat | None,
                    stop_ids: list[int] | None = None) -> GrammarProcessor | None:
    """A fresh logits processor forcing what the request asks for, or None when nothing is.

    `stop_ids` are the tokens that may end the output (default: the tokenizer's eos)."""
    constraint = compile_constraint(tokenizer, vocab_size, tools=tools, choice=choice,
                                    response_format=response_format, fmt=fmt, stop_ids=stop_ids)
    if constraint is None:
        return None
    return GrammarProcessor(constraint.compiled, vocab_size, constraint.description)


__all__ = ["Constraint", "GrammarProcessor", "build_processor", "compile_constraint", "compiler_for"]
