"""Notebook 04's exercises: Hermes on markup, a stop that keeps words whole, schema checks, a ReAct buffer."""
from __future__ import annotations

import json
from itertools import accumulate

from chatlab._thirdparty import Graded
from chatlab.lab.evals.relay import TOOLS  # the notebook's weather tool, defined once
from chatlab.lab.exercises import Case, Exercise, register
from chatlab.lab.exercises.nb03 import stop_stream_reference
from chatlab.tools import fold, get_parser, validate_arguments
from chatlab.tools.stream import ContentDelta, ParserEvent, ToolCallError
from chatlab.types import parse_tools

CALL = 'Action: get_current_weather\nAction Input: {"location": "Boston", "unit": "celsius"}'


def chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def hermes_content_reference(text: str, size: int) -> str | None:
    parser = get_parser("hermes", TOOLS)
    events = [e for piece in chunks(text, size) for e in parser.feed(piece)] + parser.finish()
    return fold(events).content


register(Exercise("nb04.hermes_content", lambda: [
    Case(("It is sunny in Boston <b>today</b>.", 3), "HTML tags are not calls"),
    Case(("Use <tool_ for the tag name.", 4), "a half-written tag, then plain text"),
    Case(('Let me check.\n<tool_call>\n{"name": "get_current_weather", "arguments": '
          '{"location": "Boston", "unit": "celsius"}}\n</tool_call>', 5), "a real call: only the preamble is content"),
    Case(("a < b and b > c", 1), "one character at a time"),
], reference=hermes_content_reference))


def shown_text_reference(text: str, size: int, stops: list[str]) -> str:
    return "".join(stop_stream_reference(chunks(text, size), stops)[0])


register(Exercise("nb04.shown_text", lambda: [
    Case(("Final Answer: Obsidian is a rock.\nObs", 4, ["Observation:"]), "a tail held to the end"),
    Case(("Action Input: {}\nObservation: 31°C", 4, ["Observation:"]), "the stop cuts here"),
    Case(("Observe the sky.", 3, ["Observation:"]), "'Observ' that becomes 'Observe'"),
], reference=shown_text_reference))


def problems_reference(arguments: str) -> list[str]:
    return validate_arguments(arguments, parse_tools(TOOLS), "get_current_weather")


register(Exercise("nb04.schema_problems", lambda: [
    Case(('{"location": "Boston", "unit": "kelvin"}',), "a value outside the enum"),
    Case(('{"location": "Boston"}',), "a required field missing"),
    Case(('{"location": "Boston", "unit": "celsius"}',), "a valid call: no problems"),
    Case(('{"location": 7, "unit": "celsius"}',), "a number where a string belongs"),
], reference=problems_reference))


def react_relay_reference(pieces: list[str], tool_names: list[str]) -> tuple[list[str], tuple[str, dict] | None]:
    """chatlab's ReAct parser: its content after each chunk and at the end, its call (name, dict) or None."""
    def text(events: list[ParserEvent]) -> str:   # a rejected call comes back as content too
        return "".join(e.text for e in events if isinstance(e, (ContentDelta, ToolCallError)))

    specs = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in tool_names]
    parser = get_parser("react", parse_tools(specs) if specs else ())
    sent = [text(parser.feed(p)) for p in pieces]
    sent.append(text(parser.finish()))
    calls = parser.result().tool_calls
    return sent, ((calls[0].name, json.loads(calls[0].arguments)) if calls else None)


def _same_relay(got: Graded, expected: Graded) -> bool:
    sent, call = got
    want_sent, want_call = expected
    if len(sent) != len(want_sent) or "".join(sent) != "".join(want_sent) or call != want_call:
        return False
    # streaming: after every chunk at least as much content is out as chatlab's buffer lets out
    return all(a >= b for a, b in zip(accumulate(map(len, sent)), accumulate(map(len, want_sent))))


def _relay_cases() -> list[Case]:
    names = ["get_current_weather"]
    plain = "It is 22 degrees and sunny. Enjoy your day in Boston!"
    return [
        Case((chunks(plain, 6), names), "plain text streams as it comes"),
        Case((chunks("Let me check the weather.\n" + CALL, 7), names), "text, then a call"),
        Case((chunks(CALL, 5), names), "a reply that is only a call"),
        Case((chunks("Try the Action: button.\nActionable advice: wear a coat.", 4), names),
             "'Action:' mid-line and '\\nActionable' are not calls"),
        Case((chunks("Checking.\nAction: get_time\nAction Input: {}", 6), names),
             "an unknown tool: everything goes back as content"),
        Case((chunks("Checking.\nAction: get_current_weather\nAction Input: Boston", 6), names),
             "an input that is not a JSON object: content"),
    ]


register(Exercise("nb04.react_buffer", _relay_cases, reference=react_relay_reference, same=_same_relay))
