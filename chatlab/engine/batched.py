"""openvino-genai's continuous batching as a ChatEngine's token source (GenaiSource): chatlab's
plan in, ids back through chatlab's TextAssembler, so a reply reads the same on both paths."""
from __future__ import annotations

import json
import queue
import re
import time
from dataclasses import replace
from typing import Iterator

from chatlab._thirdparty import GenaiConfig, Jsonable, Processor
from chatlab.engine.plan import ChatPlan, CompletionPlan
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.errors import ChatlabError
from chatlab.generate import Event, SamplingParams, StopFn, stop_ids_for
from chatlab.generate.assemble import TextAssembler
from chatlab.protocols import BatchedBackend
from chatlab.tools.constrain import Constraint, grammar_tools
from chatlab.tools.ebnf import unknown_names
from chatlab.tools.refs import first_keyword
from chatlab.tools.format import schema_ebnf, schema_grammar

POLL_S = 0.05  # how often a waiting stream checks whether its client has gone
_UNBOUNDED = re.compile(r"\{\s*(\d+)\s*,\s*-1\s*\}")
FIX = "use --backend openvino (chatlab's own loop) for it"


class GenaiSource:
    """Tokens from openvino-genai's shared pipeline: one stream per sequence, many at once."""

    def __init__(self, backend: BatchedBackend) -> None:
        self.backend = backend
        self.max_concurrency = int(backend.max_seqs)

    def refuse(self, req: ChatRequest | CompletionRequest) -> None:
        if req.token_logprobs[0]:
            raise ChatlabError(f"the genai backend cannot report logprobs (openvino-genai streams "
                               f"token ids without their distributions); drop logprobs, or {FIX}",
                               param="logprobs")
        if req.logit_bias:
            raise ChatlabError(f"the genai backend cannot apply logit_bias (openvino-genai has no "
                               f"per-token bias); drop logit_bias, or {FIX}", param="logit_bias")

    def accept(self, plan: ChatPlan | CompletionPlan) -> ChatPlan | CompletionPlan:
        if isinstance(plan, ChatPlan) and plan.constrained:
            # translated now: a grammar genai cannot read is a 400, never reaching the shared pipeline
            try:
                return replace(plan, adapted=structured_config(plan.constraint))
            except UnreadableGrammar as err:
                raise unreadable(plan, err.names) from None
        return plan

    def constraint(self, plan: ChatPlan) -> Processor:
        # a plan another engine made has no adapted config yet
        return plan.adapted if plan.adapted is not None else structured_config(plan.constraint)

    def events(self, prompt_ids: tuple[int, ...], params: SamplingParams, processor: Processor,
               should_stop: StopFn | None) -> Iterator[Event]:
        """The loop's events for one sequence, from the ids the shared pipeline streams back."""
        stop_ids = stop_ids_for(self.backend, params)
        text = TextAssembler(self.backend.decoder, params.stop, stop_ids, len(prompt_ids))
        t0 = time.perf_counter()
        t_first = 0.0
        config = generation_config(params, stop_ids, processor, self.backend.vocab_size)
        stream = self.backend.submit(list(prompt_ids), config)
        try:
            while not text.done:
                try:
                    item = stream.get(POLL_S)
                except queue.Empty:
                    item = []  # nothing yet: only whether the client has gone is checked
                if isinstance(item, BaseException):
                    raise item
                if item is None:  # genai ended it: by length, a stop id (seen above) or a grammar
                    if stream.status != "FINISHED" or len(text.out_ids) < params.max_new_tokens:
                        text.halt()  # not by length: a grammar completed or the pipeline dropped it
                    break
                if item and not t_first:
                    t_first = time.perf_counter()
                for token in item:
                    delta = text.add(token)
                    if delta is not None:
                        yield delta
                    if text.done or len(text.out_ids) >= params.max_new_tokens:
                        break  # a stop string or id: the rest of this step's ids are past the end
                if len(text.out_ids) >= params.max_new_tokens:
                    break
                if should_stop is not None and should_stop():
                    text.halt()
                    break
        finally:
            stream.cancel()  # no-op once genai ended it; frees its KV blocks otherwise
        yield from text.finish({"ttft_s": (t_first or time.perf_counter()) - t0,
                                "total_s": time.perf_counter() - t0})


def generation_config(params: SamplingParams, stop_ids: set[int], structured: Processor = None,
                      vocab_size: int | None = None) -> GenaiConfig:
    """genai's GenerationConfig for chatlab's SamplingParams (stop strings are chatlab's to match)."""
    import openvino_genai as genai

    cfg = genai.GenerationConfig()
    cfg.max_new_tokens = int(params.max_new_tokens)
    cfg.stop_token_ids = set(stop_ids)
    cfg.ignore_eos = bool(params.ignore_eos)
    cfg.repetition_penalty = float(params.repetition_penalty)
    # genai's penalties are OpenAI's: over the generated tokens, once / per occurrence
    cfg.presence_penalty = float(params.presence_penalty)
    cfg.frequency_penalty = float(params.frequency_penalty)
    cfg.do_sample = params.temperature > 0  # else greedy
    if cfg.do_sample:
        cfg.temperature = float(params.temperature)
        cfg.top_p = float(params.top_p)
        if 0 < params.top_k < min(vocab_size or 2**63, 2**63):
            cfg.top_k = int(params.top_k)
        if params.seed is not None:
            cfg.rng_seed = int(params.seed)
    if structured is not None:
        cfg.structured_output_config = structured
    return cfg


def structured_config(constraint: Constraint | None) -> Processor:
    """genai's StructuredOutputConfig for a plan's Constraint (None: nothing is forced)."""
    import openvino_genai as genai

    if constraint is None:
        return None
    kind, spec = constraint.kind, constraint.spec
    if kind == "schema":
        # xgrammar's compact JSON grammar: genai's schema mode allows free whitespace
        return genai.StructuredOutputConfig(grammar=readable_ebnf(schema_ebnf(spec[0], spec[1])))
    return genai.StructuredOutputConfig(structural_tags_config=structural_tag(spec))


def ebnf_for_genai(ebnf: str) -> str:
    """xgrammar's printed EBNF as openvino-genai's older xgrammar reads it (`{n,}`)."""
    return _UNBOUNDED.sub(r"{\1,}", ebnf)


class UnreadableGrammar(ChatlabError):
    """A printed grammar using names genai's grammar reader does not know (`names`)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"the grammar uses {', '.join(names[:3])}, which openvino-genai's "
                         f"grammar reader does not know; {FIX}")
        self.names = names


def readable_ebnf(ebnf: str) -> str:
    """ebnf_for_genai's text; UnreadableGrammar where a rule uses a name genai does not know."""
    text = ebnf_for_genai(ebnf)
    names = unknown_names(text)
    if names:
        raise UnreadableGrammar(names)
    return text


# schema keywords that chatlab's xgrammar prints as builtin calls (Regex) genai cannot read
_PRINTED_AS_BUILTINS = ("pattern", "patternProperties", "propertyNames")


def unreadable(plan: ChatPlan, names: list[str]) -> ChatlabError:
    """The 400 for a plan whose grammar genai cannot read, naming the schema keyword to blame."""
    blamed: tuple[Jsonable, str] | None = None
    if plan.constraint is not None and plan.constraint.kind == "schema":
        assert plan.response_format is not None  # a schema constraint is the response_format's
        blamed = (plan.response_format.schema, "response_format.json_schema.schema")
    else:
        for i, tool in enumerate(plan.tools):
            try:
                readable_ebnf(str(schema_grammar(grammar_tools([tool], [tool])[0])["grammar"]))
            except UnreadableGrammar:
                blamed = (tool.schema, f"tools[{i}].function.parameters")
                break
            except ChatlabError:
                continue  # a tool the plan does not constrain, with a schema the grammar refuses
    generic = (f"this request's grammar uses {', '.join(names[:3])}, which the genai backend's "
               f"grammar reader (openvino-genai's xgrammar) does not know; simplify the schema, or {FIX}")
    if blamed is None:
        return ChatlabError(generic)
    schema, where = blamed
    # the keywords in order: pattern is the likeliest
    found = next((hit for kw in _PRINTED_AS_BUILTINS if (hit := first_keyword(schema, (kw,)))), None)
    if found is None:
        return ChatlabError(generic, param=where)
    keyword, at = found
    return ChatlabError(f"{where}{at} uses {keyword!r}, which the genai backend cannot enforce "
                        f"(openvino-genai's grammar reader has no {names[0]} rules); drop "
                        f"{keyword!r}, or {FIX}", param=f"{where}{at}")


def structural_tag(spec: dict[str, Jsonable]) -> GenaiConfig:
    """An xgrammar structural-tag format (chatlab's ToolFormat output) as genai's objects."""
    from openvino_genai import StructuredOutputConfig as S

    kind = spec.get("type")
    if kind == "tag":
        return S.Tag(spec["begin"], structural_tag(spec["content"]), spec["end"])
    if kind == "grammar":
        return S.EBNF(readable_ebnf(spec["grammar"]))
    if kind == "json_schema":
        schema = spec["json_schema"]
        return S.JSONSchema(schema if isinstance(schema, str) else json.dumps(schema))
    if kind == "const_string":
        return S.ConstString(spec["value"])
    if kind == "any_text":
        return S.AnyText()
    if kind == "or":
        return S.Union([structural_tag(e) for e in spec["elements"]])
    if kind == "sequence":
        return S.Concat([structural_tag(e) for e in spec["elements"]])
    if kind == "triggered_tags":
        return S.TriggeredTags(list(spec["triggers"]), [structural_tag(t) for t in spec["tags"]],
                               bool(spec.get("at_least_one", False)), bool(spec.get("stop_after_first", False)))
    raise ChatlabError(f"the genai backend cannot express the grammar part {kind!r} of this "
                       f"request's tool format; {FIX}")
