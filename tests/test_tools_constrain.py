"""Constrained decoding: grammar-level checks (fast) and real SmolLM2-135M generations."""
from __future__ import annotations

import json

import pytest

from chatlab.errors import ChatlabError
from chatlab.tools import get_tool_format, parse_tool_calls, validate_arguments
from chatlab.tools.constrain import build_processor, compile_constraint
from chatlab.tools.schema import validate_instance
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
UNCOMPILABLE = [{"$ref": "#/nope"}, {"type": "string", "enum": []},
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
