"""Strict scores of extraction methods over the dog set: gold name and color up to `normalize`, or wrong."""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.lab.evals.sets import DogCase

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import Runnable


Method = Callable[[str], object]  # a sentence -> what the method extracted (a dict, a model, ...)


def normalize(value: str) -> str:
    """Lower case, hyphens as spaces, no punctuation at the ends, no leading article."""
    text = re.sub(r"[\s\-_]+", " ", value.strip().lower()).strip(" .,;:!?\"'")
    return re.sub(r"^(a|an|the) ", "", text)


def _field(obj: object, name: str) -> str:
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Outcome:
    """One method on one sentence."""

    case: DogCase
    name: str
    color: str
    error: str = ""

    @property
    def name_ok(self) -> bool:
        return not self.error and normalize(self.name) == normalize(self.case.name)

    @property
    def color_ok(self) -> bool:
        golds = {normalize(c) for c in (self.case.color, *self.case.accept_color)}
        return not self.error and normalize(self.color) in golds

    @property
    def ok(self) -> bool:
        return self.name_ok and self.color_ok


def score_dog(case: DogCase, predicted: object) -> Outcome:
    """The outcome of one prediction (an object or dict with `name` and `color`)."""
    return Outcome(case, _field(predicted, "name"), _field(predicted, "color"))


@dataclass
class MethodScore:
    """A method's outcomes over the set, and the wall time it took."""

    method: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def _share(self, attr: str) -> float:
        return sum(getattr(o, attr) for o in self.outcomes) / max(len(self.outcomes), 1)

    @property
    def accuracy(self) -> float:
        return self._share("ok")

    @property
    def name_accuracy(self) -> float:
        return self._share("name_ok")

    @property
    def color_accuracy(self) -> float:
        return self._share("color_ok")

    @property
    def errors(self) -> int:
        return sum(bool(o.error) for o in self.outcomes)

    def outcome(self, case_id: str) -> Outcome:
        for o in self.outcomes:
            if o.case.id == case_id:
                return o
        raise ChatlabError(f"no outcome for {case_id!r} in {self.method!r}; ids: "
                           f"{', '.join(o.case.id for o in self.outcomes)}")

    def wrong(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


def evaluate(methods: dict[str, Method], cases: Iterable[DogCase]) -> list[MethodScore]:
    """Every method on every case, in order; an exception (a server's 400, a failed validation) is wrong."""
    cases = list(cases)
    if not methods or not cases:
        raise ChatlabError("evaluate needs at least one method and one case; pass "
                           "{'label': text -> Dog} and load_dogs()")
    scores = []
    for label, method in methods.items():
        score = MethodScore(label)
        start = time.perf_counter()
        for case in cases:
            try:
                score.outcomes.append(score_dog(case, method(case.text)))
            except Exception as err:  # noqa: BLE001 - any failure is a wrong answer, kept as text
                score.outcomes.append(Outcome(case, "", "", f"{type(err).__name__}: {err}"[:200]))
        score.seconds = time.perf_counter() - start
        scores.append(score)
    return scores


def markdown_table(scores: list[MethodScore], focus: str | None = None,
                   focus_label: str | None = None) -> str:
    """One row per method (accuracies, errors, seconds); `focus`: a column of answers to that case."""
    head = "| method | both right | name right | color right | errors | s |"
    rule = "|---|---|---|---|---|---|"
    if focus:
        head, rule = head + f" {focus_label or f'answer to {focus}'} |", rule + "---|"
    lines = [head, rule]
    for s in scores:
        n = len(s.outcomes)
        row = (f"| {s.method} | {round(s.accuracy * n)}/{n} ({s.accuracy:.0%}) | "
               f"{s.name_accuracy:.0%} | {s.color_accuracy:.0%} | {s.errors} | {s.seconds:.0f} |")
        if focus:
            o = s.outcome(focus)
            shown = "error" if o.error else f"{o.name!r}, {o.color!r}"
            row += f" {'✓' if o.ok else '✗'} {shown} |"
        lines.append(row)
    return "\n".join(lines)


def controls_table(columns: dict[str, list[MethodScore] | str]) -> str:
    """Methods down, models (or controls) across: "right/total" per cell. A column given as a
    string ("not installed") shows it in every row, so a missing model does not read as zero."""
    scored = [col for col in columns.values() if not isinstance(col, str)]
    methods = list(dict.fromkeys(s.method for col in scored for s in col))
    if not methods:
        raise ChatlabError("controls_table needs at least one column of scores")

    def cell(col: list[MethodScore] | str, method: str) -> str:
        if isinstance(col, str):
            return col
        found = next((s for s in col if s.method == method), None)
        if found is None:
            return "-"
        n = len(found.outcomes)
        return f"{round(found.accuracy * n)}/{n}"

    lines = ["| method | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(cell(col, m) for col in columns.values()) + " |")
    return "\n".join(lines)


_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")


def _words(text: str) -> list[str]:
    # "Tilly's" -> "Tilly": a possessive is a person's or the dog's name plus an ending
    return [re.sub(r"'s$", "", w) for w in _WORD.findall(text)]


def capitalised_words(text: str) -> list[str]:
    """Distinct capitalised words, in order (candidate names)."""
    return list(dict.fromkeys(w for w in _words(text) if w[0].isupper()))


def word_runs(text: str, longest: int = 3) -> list[str]:
    """Distinct runs of 1..`longest` consecutive words, lower case (candidate colors); a
    hyphenated word counts whole and in parts ("apricot-colored" offers "apricot" too)."""
    whole = [w.lower() for w in _words(text)]
    parts = [p for w in whole for p in w.split("-") if p]
    runs = (" ".join(ws[i:i + n]) for ws in (whole, parts)
            for n in range(1, longest + 1) for i in range(len(ws) - n + 1))
    return list(dict.fromkeys(runs))


def span_schema(text: str, title: str = "Dog") -> dict[str, Jsonable]:
    """{"name": one of the capitalised words, "color": one of the word runs} for `text`."""
    names, runs = capitalised_words(text), word_runs(text)
    if not names:
        raise ChatlabError(f"no capitalised word in {text[:80]!r} to offer as a name; an extractive "
                           "schema needs the name in the sentence (use a plain schema otherwise)")
    return {"title": title, "type": "object",
            "properties": {"name": {"type": "string", "enum": names},
                           "color": {"type": "string", "enum": runs}},
            "required": ["name", "color"], "additionalProperties": False}


# The RTP-LLM article's prompt for create_structured_output_chain, as it wrote it.
ARTICLE_SYSTEM = "You are a world class algorithm for extracting information in structured formats."
ARTICLE_HUMAN = "Use the given format to extract information from the following input: {input}"


def article_chain(schema: type, llm: "BaseChatModel") -> Callable[[str], object]:
    """The article's way: the legacy `create_structured_output_chain`, now in langchain-classic."""
    from langchain_classic.chains.openai_functions import create_structured_output_chain
    from langchain_core._api.deprecation import LangChainDeprecationWarning
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("system", ARTICLE_SYSTEM), ("human", ARTICLE_HUMAN)])
    with warnings.catch_warnings():
        # deprecated on purpose (the article's API); this one warning, for this one call
        warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
        chain = create_structured_output_chain(schema, llm, prompt)
    return lambda text: chain.invoke({"input": text})["function"]


def _literal(text: str) -> str:
    """Braces as text, not template slots, so JSON can be written as it is."""
    return text.replace("{", "{{").replace("}", "}}")


def prompted(system: str, runnable: "Runnable", examples: Sequence[tuple[str, str]] = (),
             human: str = "Sentence: {input}") -> Callable[[str], object]:
    """`system`, each example as a user and an assistant turn, then the real input, piped into
    `runnable`. Examples as turns: a small model copies a list's last example, but continues a chat."""
    from langchain_core.prompts import ChatPromptTemplate

    if "{input}" not in human:
        raise ChatlabError(f"human={human!r} has no {{input}} slot; write e.g. 'Sentence: {{input}}'")
    turns: list[tuple[str, str]] = [("system", _literal(system))]
    for given, answer in examples:
        turns += [("human", _literal(human.replace("{input}", given))), ("ai", _literal(answer))]
    chain = ChatPromptTemplate.from_messages([*turns, ("human", human)]) | runnable
    return lambda text: chain.invoke({"input": text})


def streamed_call(schema: type, llm: "BaseChatModel") -> Callable[[str], object]:
    """Way (d): `bind_tools([schema])` with the tool named, streamed; the chunks added up as
    langchain adds them, the call's arguments fill `schema` (no call: an error, not `{}`)."""
    bound = llm.bind_tools([schema], tool_choice=schema.__name__)

    def run(text: str) -> object:
        # langchain's message + message arithmetic is typed as a prompt template's
        total: "AIMessage | ChatPromptTemplate | None" = None
        for chunk in bound.stream(text):
            total = chunk if total is None else total + chunk
        calls = getattr(total, "tool_calls", None) or []
        if not calls:
            raise ChatlabError(f"the stream ended without a {schema.__name__} call")
        return schema(**calls[0]["args"])

    return run
