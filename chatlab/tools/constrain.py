"""Constrained decoding with xgrammar: forced calls (a named or "required" tool_choice, which wins
over response_format), JSON answers that always parse, and under "auto" a constrained call once the
format's trigger is written. Compiled before a request is queued, so a bad schema is a 400."""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Sequence

from chatlab._thirdparty import HFTokenizer, Jsonable, tokenizer_kind
from chatlab.errors import ChatlabError
from chatlab.tools.enforceable import check_enforceable
from chatlab.tools.format import ToolFormat, grammar_error, schema_ebnf
from chatlab.types import ResponseFormat, ToolChoice, ToolSpec

if TYPE_CHECKING:
    import numpy as np
    import xgrammar as xgr

# tokenizer key -> (the tokenizer, kept alive so its id is not reused; its compiler)
_COMPILERS: dict[tuple, tuple[HFTokenizer, "xgr.GrammarCompiler"]] = {}
_GRAMMARS: OrderedDict[tuple, "Constraint | None"] = OrderedDict()  # the memo of compile_constraint
CACHE_SIZE = 64


@dataclass(frozen=True)
class Constraint:
    """What a request forces, decided (`kind`, `spec`: what genai translates) and compiled once;
    shareable, since each run gets its own matcher."""

    kind: str
    spec: Jsonable = field(repr=False)  # a structural-tag format, or [schema text, strict]
    compiled: "xgr.CompiledGrammar" = field(repr=False)
    description: str  # e.g. "hermes call: named", "json_schema"


def compiler_for(tokenizer: HFTokenizer, vocab_size: int,
                 stop_ids: list[int] | None = None) -> "xgr.GrammarCompiler":
    """One xgrammar GrammarCompiler per tokenizer (building its token table is slow)."""
    import xgrammar as xgr

    key = (id(tokenizer), vocab_size, tuple(stop_ids or ()))
    if key not in _COMPILERS:
        if tokenizer_kind(tokenizer) == "tiktoken":   # raw byte tokens
            vocab = [tokenizer.enc.decode_single_token_bytes(i) for i in range(tokenizer.enc.n_vocab)]
            info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=vocab_size,
                                     stop_token_ids=stop_ids or [tokenizer.eos_token_id])
        else:
            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                      stop_token_ids=stop_ids or None)
        _COMPILERS[key] = (tokenizer, xgr.GrammarCompiler(info, max_threads=2))
    return _COMPILERS[key][1]


def decide(tools: Sequence[ToolSpec], choice: ToolChoice, response_format: ResponseFormat | None,
           fmt: ToolFormat | None) -> tuple[str, Jsonable, str] | None:
    """(kind, what to compile, description), or None when nothing is forced; refuses unenforceable schemas."""
    if choice.mode == "named" or (choice.mode == "required" and tools):
        if fmt is None:
            raise ChatlabError(f"tool_choice {choice.mode!r} needs a template with a tool-call "
                               "format to force the call in; choose one (`chatlab templates`)",
                               param="tool_choice")
        chosen = [t for t in tools if choice.mode != "named" or t.name == choice.name]
        if not chosen:
            raise ChatlabError(f"tool_choice names {choice.name!r}, which is not among the tools; "
                               "name one of the tools sent", param="tool_choice")
        structure = _structure(fmt.forced_structure, tools, chosen)
        return "tag", structure, f"{fmt.name} call: {choice.mode}"
    if response_format is not None:
        strict = response_format.kind == "json_schema"
        schema = response_format.schema if strict else {"type": "object"}
        schema = check_enforceable(schema, "response_format.json_schema.schema")
        return "schema", (json.dumps(schema), strict), response_format.kind
    if choice.mode == "auto" and fmt is not None and fmt.trigger is not None and tools:
        # (without a trigger a format constrains nothing under auto: no schema is refused)
        return "tag", _structure(fmt.lazy_structure, tools, tools), f"{fmt.name} call when triggered"
    return None


def _structure(build: Callable[[Sequence[ToolSpec]], Jsonable], tools: Sequence[ToolSpec],
               chosen: Sequence[ToolSpec]) -> Jsonable:
    """A format's structure for `chosen`; a schema refused names its tool as `param`."""
    try:
        return build(grammar_tools(tools, chosen))
    except ChatlabError as err:
        if err.param is None:
            err.param = _culprit(tools, chosen)
        raise


def grammar_tools(tools: Sequence[ToolSpec], chosen: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The chosen tools, each with its parameters as the grammar compiler gets them."""
    return [replace(tool, parameters=check_enforceable(tool.schema, f"tools[{i}].function.parameters"))
            for i, tool in enumerate(tools) if tool in chosen]


def compile_constraint(tokenizer: HFTokenizer, vocab_size: int, *, tools: Sequence[ToolSpec],
                       choice: ToolChoice, response_format: ResponseFormat | None,
                       fmt: ToolFormat | None, stop_ids: list[int] | None = None) -> Constraint | None:
    """The request's Constraint (memoized), None when nothing is forced; ChatlabError for a bad schema."""
    rf = None if response_format is None else (response_format.kind, json.dumps(response_format.schema))
    key = (id(tokenizer), vocab_size, tuple(stop_ids or ()), fmt.name if fmt else None, choice, rf,
           json.dumps([t.to_openai() for t in tools]))
    if key in _GRAMMARS:
        _GRAMMARS.move_to_end(key)
        return _GRAMMARS[key]
    decided = decide(tools, choice, response_format, fmt)
    constraint = None if decided is None else _compile(compiler_for(tokenizer, vocab_size, stop_ids),
                                                       *decided, tools=tools)
    _GRAMMARS[key] = constraint
    if len(_GRAMMARS) > CACHE_SIZE:
        _GRAMMARS.popitem(last=False)
    return constraint


def _compile(compiler: "xgr.GrammarCompiler", kind: str, spec: Jsonable, description: str, *,
             tools: Sequence[ToolSpec]) -> Constraint:
    try:
        compiled = (compiler.compile_grammar(schema_ebnf(*spec)) if kind == "schema" else
                    compiler.compile_structural_tag({"type": "structural_tag", "format": spec}))
    except RuntimeError as err:
        if kind == "schema":
            raise grammar_error("the response_format schema", err,
                                "response_format.json_schema.schema") from None
        raise grammar_error("the tools' parameter schemas", err, _culprit(tools, tools)) from None
    return Constraint(kind, spec, compiled, description)


def _culprit(tools: Sequence[ToolSpec], chosen: Sequence[ToolSpec]) -> str:
    """The chosen tool whose schema xgrammar refuses (compiled alone), for the error's `param`."""
    import xgrammar as xgr

    for i, tool in enumerate(tools):
        where = f"tools[{i}].function.parameters"
        try:
            if tool in chosen:
                xgr.Grammar.from_json_schema(json.dumps(check_enforceable(tool.schema, where)))
        except (RuntimeError, ChatlabError):
            return where
    return "tools"


class GrammarProcessor:
    """The logits_processor of chatlab.generate: tokens the grammar forbids get -inf (mask),
    then the matcher accepts the chosen token; once complete, only a stop token is allowed."""

    def __init__(self, compiled: "xgr.CompiledGrammar", vocab_size: int, description: str) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.vocab_size = vocab_size
        self.description = description
        self.rejected: list[int] = []    # tokens the matcher refused (only if masking was skipped)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        import numpy as np
        import torch

        if isinstance(logits, np.ndarray) and not logits.flags.writeable:
            logits = logits.copy()
        tensor = logits if isinstance(logits, torch.Tensor) else torch.from_numpy(logits)
        self.matcher.fill_next_token_bitmask(self.bitmask)
        if not bool(self.bitmask[0].any()):  # a dead end: sampling would see only -inf (NaN)
            raise ChatlabError(f"the grammar ({self.description}) allows no next token: the "
                               "schema has a part no finite value matches; simplify the schema")
        self.xgr.apply_token_bitmask_inplace(tensor, self.bitmask[0], vocab_size=self.vocab_size)
        tensor[self.vocab_size:] = float("-inf")    # padded rows of lm_head are never valid
        return logits

    def accept(self, token_id: int) -> None:
        if not self.matcher.accept_token(int(token_id)):
            self.rejected.append(int(token_id))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()


def processor_for(constraint: Constraint | None, vocab_size: int) -> GrammarProcessor | None:
    """A fresh logits processor for a plan's constraint (one per run: it holds a matcher)."""
    return None if constraint is None else GrammarProcessor(constraint.compiled, vocab_size,
                                                            constraint.description)


def build_processor(tokenizer: HFTokenizer, vocab_size: int, *, tools: Sequence[ToolSpec], choice: ToolChoice,
                    response_format: ResponseFormat | None, fmt: ToolFormat | None,
                    stop_ids: list[int] | None = None) -> GrammarProcessor | None:
    """A fresh logits processor forcing what the request asks for, or None when nothing is."""
    return processor_for(compile_constraint(tokenizer, vocab_size, tools=tools, choice=choice,
                                            response_format=response_format, fmt=fmt,
                                            stop_ids=stop_ids), vocab_size)

