"""Constrained decoding: grammar-level checks (fast) and real SmolLM2-135M generations."""
from __future__ import annotations

import json

import pytest

from chatlab.errors import ChatlabError
from chatlab.tools import get_tool_format, parse_tool_calls, validate_arguments, validate_instance
from chatlab.tools.constrain import build_processor, compile_constraint
from chatlab.types import parse_response_format, parse_tool_choice, parse_tools

VOCAB = 49152   # SmolLM2's lm_head rows
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "maxLength": 30},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location", "unit"]}}}
TIME = {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object",
        "properties": {"zone": {"type": "string", "maxLength": 20}}, "required": ["zone"]}}}
TOOLS = parse_tools([WEATHER, TIME])
DOG = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
       "color": {"type": "string", "maxLength": 20}},
       "required": ["name", "color"], "additionalProperties": False}


def _accepts(proc, text: str) -> bool:
    return proc.matcher.accept_string(text)


def _request(tools, choice, response_format, fmt) -> dict:
    """The typed arguments of build_processor, parsed from OpenAI shapes as the server does."""
    tools = parse_tools(tools)
    return {"tools": tools, "choice": parse_tool_choice(choice, tools),
            "response_format": parse_response_format(response_format),
            "fmt": get_tool_format(fmt) if fmt else None}


def _proc(tokenizer, tools, choice, response_format=None, fmt="hermes", **kw):
    return build_processor(tokenizer, VOCAB, **_request(tools, choice, response_format, fmt), **kw)


# -- grammar level: no model needed ---------------------------------------------------------
@pytest.mark.parametrize("fmt, good, bad", [
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Oslo", "unit": "celsius"}}\n</tool_call>',
     '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Oslo"}}\n</tool_call>'),
    ("json", '{"name": "get_weather", "parameters": {"location": "Oslo", "unit": "fahrenheit"}}',
     '{"name": "current_time", "parameters": {"zone": "UTC"}}'),
    ("react", 'Action: get_weather\nAction Input: {"location": "Oslo", "unit": "celsius"}\nObservation:',
     'Action: get_weather\nAction Input: {"location": "Oslo", "unit": "kelvin"}'),
    ("chatglm3", 'get_weather\n```python\ntool_call(location="Oslo", unit="celsius")\n```',
     'get_weather\n```python\ntool_call(unit="celsius")\n```'),
])
def test_named_tool_grammar_accepts_only_valid_calls(smollm2_tokenizer, fmt, good, bad):
    proc = _proc(smollm2_tokenizer, TOOLS, "get_weather", None, fmt)
    assert _accepts(proc, good) and proc.matcher.is_completed()
    result = parse_tool_calls(fmt, good, TOOLS)
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    proc.matcher.reset()
    assert not _accepts(proc, bad)


def test_mask_leaves_only_grammar_tokens(smollm2_tokenizer):
    import numpy as np

    proc = _proc(smollm2_tokenizer, TOOLS, "current_time", None, "json")
    logits = np.zeros(VOCAB + 64, dtype=np.float32)          # lm_head padded past the vocab
    allowed = np.flatnonzero(np.isfinite(proc.mask(logits)))
    assert 0 < len(allowed) < 50 and allowed.max() < VOCAB
    assert all('{"name": "current_time"'.startswith(smollm2_tokenizer.decode([int(t)]))
               for t in allowed)


def test_eos_only_after_the_call_and_then_terminated(smollm2_tokenizer):
    proc = _proc(smollm2_tokenizer, TOOLS, "required", None, "hermes")
    assert not _accepts(proc, '<tool_call>\n{"name": "get_time"')     # not one of the tools
    proc.matcher.reset()
    assert _accepts(proc, '<tool_call>\n{"name": "current_time", "arguments": {"zone": "UTC"}}')
    proc.accept(2)
    assert proc.rejected == [2] and not proc.is_terminated()        # eos refused mid-call
    assert _accepts(proc, "\n</tool_call>")
    proc.accept(2)
    assert proc.is_terminated()


def test_qwen1_tiktoken_tokenizer_is_supported(qwen1_tokenizer):
    proc = build_processor(qwen1_tokenizer, 151936, **_request(TOOLS, "get_weather", None, "react"),
                           stop_ids=[151643, 151645])
    for token in qwen1_tokenizer.encode('Action: get_weather\nAction Input: {"location": "北京", '
                                        '"unit": "celsius"}\nObservation:'):
        proc.accept(token)
    proc.accept(151645)
    assert proc.rejected == [] and proc.is_terminated()


@pytest.mark.parametrize("tools, choice, response_format, fmt", [
    (TOOLS, "none", None, "hermes"),
    (TOOLS, "auto", None, "json"),             # a JSON call opens the message: no lazy trigger
    (None, "required", None, "hermes"),         # llama-index sends this without tools
    (None, None, {"type": "text"}, "hermes"),
    (None, None, None, "hermes"),
])
def test_nothing_to_force_gives_no_processor(smollm2_tokenizer, tools, choice, response_format, fmt):
    assert _proc(smollm2_tokenizer, tools, choice, response_format, fmt) is None


def _tool(schema: dict) -> list:
    return parse_tools([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": schema}, "required": ["x"]}}}])


# jsonschema accepts these; xgrammar cannot compile them: a 400 before the request is queued
UNCOMPILABLE = [{"type": "string", "enum": []},
                {"type": "string", "minLength": 5, "maxLength": 2}]


@pytest.mark.parametrize("schema", UNCOMPILABLE)
@pytest.mark.parametrize("fmt", ["hermes", "json", "react"])
def test_uncompilable_tool_schema_is_a_clear_error(smollm2_tokenizer, fmt, schema):
    with pytest.raises(ChatlabError, match="tool 'f'.*cannot be turned into a grammar.*fix or simplify"):
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(_tool(schema), "f", None, fmt))


def test_uncompilable_response_schema_and_chatglm3_enum_are_clear_errors(smollm2_tokenizer):
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "minLength": 5,
                                                                         "maxLength": 2}}}
    with pytest.raises(ChatlabError, match="response_format schema cannot be turned into a grammar"):
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(None, None, rf, "hermes"))
    with pytest.raises(ChatlabError, match="tool 'f'.*empty enum"):
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(_tool({"enum": []}), "f", None, "chatglm3"))


def test_compiled_constraints_are_cached(smollm2_tokenizer):
    args = _request(TOOLS, "required", None, "hermes")
    first = compile_constraint(smollm2_tokenizer, VOCAB, **args)
    again = compile_constraint(smollm2_tokenizer, VOCAB, **_request(TOOLS, "required", None, "hermes"))
    assert again.compiled is first.compiled and first.description == "hermes call: required"
    assert compile_constraint(smollm2_tokenizer, VOCAB, **_request(TOOLS, "auto", None, "json")) is None


def test_a_forced_call_needs_a_format(smollm2_tokenizer):
    with pytest.raises(ChatlabError, match="tool-call format"):
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(TOOLS, "required", None, None))


# -- real generations from SmolLM2-135M -------------------------------------------------------
def _greedy(smollm2, user: str, proc, max_new_tokens: int = 150, system: str = "You are a helpful assistant."):
    """A minimal greedy loop with a KV cache, independent of chatlab.generate."""
    import torch

    model, tok = smollm2
    ids = tok.encode(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
                     "<|im_start|>assistant\n", add_special_tokens=False)
    out, past, step = [], None, torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            res = model(input_ids=step, past_key_values=past, use_cache=True, logits_to_keep=1)
            past, logits = res.past_key_values, res.logits[0, -1].float().clone()
            token = int((proc.mask(logits) if proc else logits).argmax())
            if proc:
                proc.accept(token)
            if token == tok.eos_token_id:
                break
            out.append(token)
            step = torch.tensor([[token]])
    return tok.decode(out)


@pytest.mark.parametrize("fmt", ["hermes", "react", "chatglm3"])
def test_smollm2_named_tool_choice_gives_a_valid_call(smollm2, fmt):
    proc = _proc(smollm2[1], TOOLS, {"type": "function", "function": {"name": "get_weather"}}, None, fmt)
    text = _greedy(smollm2, "What's the weather like in Paris?", proc)
    result = parse_tool_calls(fmt, text, TOOLS)
    assert proc.is_terminated() and result.error is None, text
    [call] = result.tool_calls
    assert call.name == "get_weather" and validate_arguments(call.arguments, TOOLS, "get_weather") == []


def test_smollm2_required_picks_one_of_the_tools(smollm2):
    proc = _proc(smollm2[1], TOOLS, "required", None, "json")
    text = _greedy(smollm2, "Hello!", proc)
    [call] = parse_tool_calls("json", text, TOOLS).tool_calls
    assert validate_arguments(call.arguments, TOOLS, call.name) == [] and proc.is_terminated()


def test_smollm2_json_schema_response(smollm2):
    proc = _proc(smollm2[1], None, None,
                 {"type": "json_schema", "json_schema": {"name": "Dog", "schema": DOG, "strict": True}})
    text = _greedy(smollm2, "John had a dog named Harry, who was a brown beagle that loved chicken. "
                   "Give the dog's name and color.", proc)
    assert proc.is_terminated(), text
    assert validate_instance(json.loads(text), DOG) == []


def test_smollm2_json_object_response(smollm2):
    proc = _proc(smollm2[1], None, None, {"type": "json_object"})
    text = _greedy(smollm2, "Reply in JSON with the keys name and color: Harry is a brown beagle.", proc)
    assert proc.is_terminated(), text
    assert isinstance(json.loads(text), dict)


def test_smollm2_auto_leaves_plain_answers_alone(smollm2):
    free = _greedy(smollm2, "Say hello.", None, 12)
    proc = _proc(smollm2[1], TOOLS, "auto", None, "hermes")
    assert proc is not None and _greedy(smollm2, "Say hello.", proc, 12) == free


# -- schemas xgrammar reads otherwise: rewritten to what it enforces, or refused -----------------
RF = "response_format.json_schema.schema"


def _json_schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def _matcher(tokenizer, schema: dict):
    return _proc(tokenizer, None, None, _json_schema(schema)).matcher


def _takes(tokenizer, schema: dict, value) -> bool:
    """Whether the schema's grammar takes `value` written as compact JSON, whole."""
    matcher = _matcher(tokenizer, schema)
    return matcher.accept_string(json.dumps(value)) and matcher.is_completed()


# (schema, a value JSON Schema allows that xgrammar left out or broke, a value it refuses)
ENFORCED = {
    "ref-with-sibling": ({"type": "object", "properties": {"a": {"$ref": "#/$defs/n", "minimum": 1000}},
                          "required": ["a"], "$defs": {"n": {"type": "integer"}}}, {"a": 1000}, {"a": 3}),
    "anchor": ({"type": "object", "properties": {"m": {"$ref": "#minute"}}, "required": ["m"],
                "$defs": {"m": {"$anchor": "minute", "type": "integer", "minimum": 0, "maximum": 59}}},
               {"m": 59}, {"m": 60}),
    "required-outside-properties": ({"type": "object", "properties": {"a": {"type": "string"}},
                                     "required": ["a", "b"]}, {"a": "x", "b": 1}, {"a": "x"}),
    "required-from-additional": ({"type": "object", "properties": {}, "additionalProperties": {"type": "integer"},
                                  "required": ["n"]}, {"n": 4}, {}),
    "pointer-escapes": ({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/a~1b"}, "t": {"$ref": "#/$defs/c~0d"}, "p": {"$ref": "#/$defs/e%20f"},
        "q": {"$ref": "#/$defs/~01"}}, "required": ["a", "t", "p", "q"],
        "$defs": {"a/b": {"const": 1}, "c~d": {"const": 2}, "e f": {"const": 3}, "~1": {"const": 4}}},
        {"a": 1, "t": 2, "p": 3, "q": 4}, {"a": 1, "t": 2, "p": 3, "q": 1}),
    "ref-into-an-array": ({"type": "object", "properties": {"a": {"$ref": "#/properties/b/anyOf/0"}, "b": {
        "anyOf": [{"type": "integer", "maximum": 3}, {"type": "string"}]}}, "required": ["a"]}, {"a": 3}, {"a": 4}),
    "ref-chain-with-siblings": ({"$ref": "#/$defs/a", "maximum": 9, "$defs": {
        "a": {"$ref": "#/$defs/b", "minimum": 2}, "b": {"type": "integer"}}}, 9, 1),
    "ipv4": ({"type": "string", "format": "ipv4"}, "10.0.0.1", "10.0.0.01"),
    "time": ({"type": "string", "format": "time"}, "23:59:59.5+01:00", "23:59:60Z"),
    "date": ({"type": "string", "format": "date"}, "2024-02-29", "2023-02-29"),
    "typeless-required": ({"required": ["a"]}, {"a": 1}, {}),
    "enum-beside-format": ({"type": "string", "format": "ipv4", "enum": ["1.2.3.4", "01.2.3.4"]},
                           "1.2.3.4", "01.2.3.4"),
    "enum-beside-minimum": ({"type": "integer", "enum": [1, 5], "minimum": 3}, 5, 1),
}


@pytest.mark.parametrize("schema, allowed, refused", ENFORCED.values(), ids=ENFORCED.keys())
def test_schemas_xgrammar_reads_otherwise_are_enforced(smollm2_tokenizer, schema, allowed, refused):
    import jsonschema

    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert check.is_valid(allowed) and not check.is_valid(refused)
    assert _takes(smollm2_tokenizer, schema, allowed) and not _takes(smollm2_tokenizer, schema, refused)


# (schema, the keyword the 400 names, where, the reason it gives)
REFUSED = {
    "unsatisfiable": ({"type": "object", "properties": {}, "additionalProperties": False, "required": ["ghost"]},
                      "required", "", "no object matches"),
    "name-propertyNames-refuses": ({"type": "object", "propertyNames": {"maxLength": 2}, "required": ["abc"]},
                                   "required", "", "no object matches"),
    "sibling-the-target-sets": ({"type": "object", "properties": {"a": {"$ref": "#/$defs/n", "minimum": 3}},
                                 "$defs": {"n": {"type": "integer", "minimum": 1}}},
                                "minimum", ".properties.a", "its target sets 'minimum' too"),
    "sibling-that-does-not-merge": ({"$ref": "#/$defs/o", "properties": {"b": {}}, "$defs": {"o": {"type": "object"}}},
                                    "properties", "", "beside a $ref"),
    "dangling-ref": ({"type": "array", "items": {"$ref": "#/$defs/a~1c"}, "$defs": {"a/b": {}}},
                     "$ref", ".items.$ref", "names nothing"),
    "unknown-format": ({"type": "string", "format": "password"}, "format", "", "the grammar knows the formats"),
    "broken-format": ({"type": "object", "properties": {"u": {"type": "string", "format": "uri-template"}}},
                      "format", ".properties.u", "the grammar knows the formats"),
    "pattern-beside-format": ({"type": "string", "format": "uuid", "pattern": "^a"}, "pattern", "", "only one"),
    "length-beside-format": ({"type": "string", "format": "date", "maxLength": 4}, "maxLength", "", "drops the length"),
    "length-beside-pattern": ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2}, "minLength", "",
                              "drops the length"),
    "const-its-siblings-refuse": ({"type": "string", "const": 3}, "const", "", "no value matches"),
    "enum-its-siblings-refuse": ({"type": "integer", "enum": [1, 2], "minimum": 5}, "enum", "", "no value matches"),
}


@pytest.mark.parametrize("schema, keyword, at, why", REFUSED.values(), ids=REFUSED.keys())
def test_schemas_xgrammar_would_break_are_refused_naming_keyword_and_path(smollm2_tokenizer, schema, keyword,
                                                                          at, why):
    with pytest.raises(ChatlabError) as err:
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(None, None, _json_schema(schema), "hermes"))
    assert err.value.param == RF + at and repr(keyword) in str(err.value) and why in str(err.value)
    # a tool's parameters: the same refusal, naming the tool
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    tool = parse_tools([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": inner}, "required": ["x"], "$defs": schema.get("$defs", {})}}}])
    with pytest.raises(ChatlabError) as err:
        compile_constraint(smollm2_tokenizer, VOCAB, **_request(tool, "f", None, "hermes"))
    assert err.value.param == "tools[0].function.parameters.properties.x" + at and repr(keyword) in str(err.value)


def test_each_format_grammar_writes_only_what_the_format_checker_accepts():
    """Exhaustive where the format is a pattern chatlab wrote (every date of leap and common
    years, times around each bound, every ipv4 octet): the grammar takes a string exactly when
    jsonschema's 2020-12 checker does, except what it leaves out on purpose (a lowercase `z`, a
    hostname of 4 labels, an ipv6 address with an ipv4 tail). The rest (xgrammar's own
    grammars) by 40 random walks each. And genai's older grammar reader reads every one."""
    import random

    import jsonschema

    from chatlab.engine.batched import readable_ebnf
    from chatlab.tools.enforceable import FORMAT_PATTERNS, FORMATS, check_enforceable
    from chatlab.tools.format import schema_ebnf

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    years = ["0000", "0001", "0004", "0100", "0400", "1900", "2000", "2023", "2024", "9999"]
    dates = [f"{y}-{m:02d}-{d:02d}" for y in years for m in range(14) for d in range(33)]
    times = [f"{h:02d}:{mi:02d}:{s:02d}{frac}{zone}" for h in (0, 23, 24) for mi in (0, 59, 60)
             for s in (0, 59, 60) for frac in ("", ".5", ".") for zone in ("Z", "+00:00", "-23:59", "+24:00", "")]
    octets = [str(n) for n in range(260)] + ["00", "01", "001", "099", "-1"]
    strings = {"date": dates, "time": times, "date-time": [f"{d}T{t}" for d in dates[::37] for t in times[::9]],
               "ipv4": [f"{o}.1.22.{o}" for o in octets] + ["1.2.3", "1.2.3.4.5"],
               "ipv6": ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1::8", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8:9",
                        "1::2::3", ":1", "12345::", "::1.2.3.4", "g::"],
               "hostname": ["a", "a-b", "-a", "a-", "a.b.c", "a" * 63, "a" * 64, "a_b", "a..b", ""],
               "json-pointer": ["", "/", "/a~0b/c~1d", "/a~2", "a", "/~"]}
    for fmt in sorted(FORMATS | set(FORMAT_PATTERNS)):
        ebnf = schema_ebnf(json.dumps(check_enforceable({"type": "string", "format": fmt}, "x")))
        readable_ebnf(ebnf)
        grammar = _CharGrammar(ebnf)
        for s in strings.get(fmt, []):
            narrowed = s.endswith("z") or s == "a.b.c.d" or (fmt == "ipv6" and "." in s)
            valid = checker.conforms(s, fmt) and not narrowed
            assert grammar.takes(json.dumps(s)) == valid, (fmt, s)
        if fmt not in strings:
            for text in grammar.random_walks(40, random.Random(fmt)):
                assert checker.conforms(json.loads(text), fmt), (fmt, text)


class _CharGrammar:
    """A grammar over a vocabulary of single printable characters, to read texts through."""

    def __init__(self, ebnf: str) -> None:
        import xgrammar as xgr

        self.vocab = [chr(i) for i in range(32, 127)] + ["<end>"]
        self.end = len(self.vocab) - 1
        info = xgr.TokenizerInfo(self.vocab, xgr.VocabType.RAW, vocab_size=len(self.vocab),
                                 stop_token_ids=[self.end])
        self.compiled = xgr.GrammarCompiler(info).compile_grammar(ebnf)

    def takes(self, text: str) -> bool:
        import xgrammar as xgr

        matcher = xgr.GrammarMatcher(self.compiled)
        return matcher.accept_string(text) and matcher.is_completed()

    def random_walks(self, n: int, rng) -> list[str]:
        """Up to `n` texts the grammar takes, each built one character at a time, picked at
        random among those the grammar allows (a walk past 200 characters is dropped)."""
        import torch
        import xgrammar as xgr

        bitmask = xgr.allocate_token_bitmask(1, len(self.vocab))
        texts = []
        for _ in range(n):
            matcher, text = xgr.GrammarMatcher(self.compiled), ""
            while len(text) <= 200:
                matcher.fill_next_token_bitmask(bitmask)
                logits = torch.zeros(1, len(self.vocab))
                xgr.apply_token_bitmask_inplace(logits, bitmask)
                allowed = [t for t in range(len(self.vocab)) if logits[0, t] > -1e30]
                if self.end in allowed and (len(allowed) == 1 or rng.random() < 0.4):
                    texts.append(text)
                    break
                token = rng.choice([t for t in allowed if t != self.end])
                assert matcher.accept_token(token)
                text += self.vocab[token]
        return texts


# -- the same shapes on SmolLM2 through the engine: sampled replies validate ------------------------
SAMPLED = {
    "ref-with-sibling": ENFORCED["ref-with-sibling"][0],
    "anchor": ENFORCED["anchor"][0],
    "required-outside-properties": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"],
                                    "additionalProperties": {"type": "integer"}, "maxProperties": 2},
    "pointer-escapes": ENFORCED["pointer-escapes"][0],
    "ipv4-and-time": {"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"},
                                                       "at": {"type": "string", "format": "time"}},
                      "required": ["ip", "at"]},
}


@pytest.mark.parametrize("schema", SAMPLED.values(), ids=SAMPLED.keys())
def test_smollm2_samples_at_temperature_1_validate(chat_engine, schema):
    """Three seeded samples at temperature 1, each valid for the schema by jsonschema with its
    2020-12 format checker (and as a forced call's arguments, for the $ref with a sibling)."""
    import jsonschema

    from chatlab.engine import parse_request

    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    ask = {"messages": [{"role": "user", "content": "Reply with a JSON object."}], "temperature": 1,
           "n": 3, "seed": 11, "max_tokens": 60}
    out = chat_engine.chat(chat_engine.check(parse_request({**ask, "response_format": _json_schema(schema)})))
    for choice in out["choices"]:
        assert choice["finish_reason"] == "stop", choice
        assert check.is_valid(json.loads(choice["message"]["content"])), choice["message"]["content"]
    if schema is not SAMPLED["ref-with-sibling"]:
        return
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    out = chat_engine.chat(chat_engine.check(parse_request(
        {**ask, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "f"}}})))
    for choice in out["choices"]:
        [call] = choice["message"]["tool_calls"]
        assert check.is_valid(json.loads(call["function"]["arguments"])), call
