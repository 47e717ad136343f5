"""Positive controls: gold replies through the evals' own path; what a model loses beside them is its own."""
from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.backends import export
from chatlab.errors import ChatlabError
from chatlab.lab.evals.retrieval import answer_has_key
from chatlab.lab.evals.sets import DogCase, Question
from chatlab.models import memory, store
from chatlab.models.assets import get_asset
from chatlab.tools.jsonstyle import CALL_ARGS, CALL_END, CALL_HEAD

OPTIONAL_MODEL = "qwen2.5-coder-0.5b-instruct"  # the stronger column, when its asset is installed
NO_CASE = "(no eval case found in this prompt)"  # what the oracle says to a prompt it cannot place
PEAK = 30.0  # softmax mass on the scripted token: 1 - vocab * e^-30, i.e. 1 at any temperature


class ScriptedBackend:
    """A step backend that plays `replies` (text, or token ids) one per prefill."""

    compute_notes: tuple[str, ...] = ()  # the load profile's notes (chatlab.backends.precision)

    name, precision, threads = "scripted", "f32", None

    def __init__(self, tokenizer: HFTokenizer, replies: Sequence[str | Sequence[int]],
                 context_length: int = 4096, eos_id: int | None = None) -> None:
        if not replies:
            raise ValueError("a script needs at least one reply")
        self.tokenizer = tokenizer
        self.vocab_size = max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
        self.context_length = context_length
        eos = tokenizer.eos_token_id if eos_id is None else eos_id
        self.eos_ids = [int(eos)]
        self.replies = [list(r) if not isinstance(r, str) else
                        list(tokenizer.encode(r, add_special_tokens=False)) for r in replies]
        self.calls = 0  # prefills so far: which reply is playing
        self.prompts: list[list[int]] = []  # every prompt seen, for tests to inspect
        self._ids: list[int] = []
        self._pos = 0

    def _row(self) -> np.ndarray:
        row = np.zeros(self.vocab_size, dtype=np.float32)
        nxt = self._ids[self._pos] if self._pos < len(self._ids) else self.eos_ids[0]
        row[nxt] = PEAK
        return row

    def prefill(self, ids: list[int]) -> np.ndarray:
        if not ids:
            raise ValueError("prefill needs at least one token")
        self.prompts.append(list(ids))
        self._ids = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        self._pos = 0
        return self._row()

    def step(self, token_id: int) -> np.ndarray:
        # follow the script while the loop agrees; once a grammar or a bias chose otherwise, end
        if self._pos < len(self._ids) and token_id == self._ids[self._pos]:
            self._pos += 1
        else:
            self._pos = len(self._ids)
        return self._row()

    def reset(self) -> None:
        self._ids, self._pos = [], 0

    def __repr__(self) -> str:
        return f"<ScriptedBackend vocab={self.vocab_size} ctx={self.context_length}>"


class OracleBackend(ScriptedBackend):
    """Replays `answers[key]` for the prompt that contains `key` (the last one in the prompt)."""

    name = "oracle"

    def __init__(self, tokenizer: HFTokenizer, answers: Mapping[str, str], context_length: int = 8192,
                 as_call: Callable[[str, str], str | None] | None = None) -> None:
        if not answers:
            raise ChatlabError("an oracle needs at least one (prompt text -> gold answer) pair")
        super().__init__(tokenizer, [NO_CASE], context_length=context_length)
        self.answers = dict(answers)
        self.as_call = as_call
        self._encoded = {key: self._encode(text) for key, text in self.answers.items()}
        self._unknown = self._encode(NO_CASE)
        self.misses = 0  # prompts that held no known case: a control with misses proves nothing

    def _encode(self, text: str) -> list[int]:
        # as text: a quoted "<|im_start|>" in ordinary pieces, as a model writes it, not the control id
        return list(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))

    @property
    def placed(self) -> int:
        """Prompts so far whose eval case the oracle found (all of them, for a sound control)."""
        return len(self.prompts) - self.misses

    def case_in(self, prompt: str) -> str | None:
        """The key found last in `prompt`, or None."""
        found = [(prompt.rfind(key), len(key), key) for key in self.answers if key in prompt]
        return max(found)[2] if found else None

    def prefill(self, ids: list[int]) -> np.ndarray:
        prompt = self.tokenizer.decode(list(ids))
        key = self.case_in(prompt)
        if key is None:
            self.misses += 1
            reply = self._unknown
        else:
            call = self.as_call(prompt, self.answers[key]) if self.as_call else None
            reply = self._encoded[key] if call is None else self._encode(call)
        # ScriptedBackend.prefill plays self.replies[calls]: point it at this prompt's reply first
        self.replies = [reply]
        self.calls = 0
        return super().prefill(ids)


def hermes_call(name: str, arguments: str) -> str:
    """One call in the Hermes format (SmolLM2's and Qwen2.5's), exactly as its grammar forces it."""
    return f"{CALL_HEAD}{name}{CALL_ARGS}{arguments}{CALL_END}"


def listed_tool(prompt: str) -> dict[str, Jsonable] | None:
    """The first tool of a Hermes `<tools>` block in a rendered prompt (its OpenAI JSON), or None."""
    match = re.search(r"<tools>\s*(\{.*?\})\s*\n", prompt, re.S)
    if not match:
        return None
    try:
        return json.loads(match.group(1)).get("function")
    except ValueError:
        return None


def dog_call(prompt: str, gold: str) -> str | None:
    """The gold answer as a call to the tool the prompt lists, filled the way its schema asks.
    langchain's legacy chain (the article's) wraps the schema in one `output` object property."""
    tool = listed_tool(prompt)
    if tool is None:
        return None
    props = (tool.get("parameters") or {}).get("properties") or {}
    args: Jsonable = json.loads(gold)
    if set(args) - set(props) and len(props) == 1:
        (wrapper,) = props
        args = {wrapper: args}
    return hermes_call(tool["name"], json.dumps(args))


def dog_oracle(tokenizer: HFTokenizer, cases: Iterable[DogCase]) -> OracleBackend:
    """An oracle answering each dog sentence with its gold JSON, as a call when the prompt lists a tool."""
    gold = {c.text: json.dumps({"name": c.name, "color": c.color}) for c in cases}  # the schema's order
    return OracleBackend(tokenizer, gold, as_call=dog_call)


def rag_gold(question: Question) -> str:
    """A gold answer: the passage's quote, with the first key phrase added when the quote lacks
    every key phrase (so the control checks the plumbing, not how the set was written)."""
    quote = question.quote
    return quote if answer_has_key(quote, question) else f"{quote} ({question.answer[0]})"


def rag_oracle(tokenizer: HFTokenizer, questions: Iterable[Question]) -> OracleBackend:
    """An oracle that answers each question with its gold answer."""
    return OracleBackend(tokenizer, {q.question: rag_gold(q) for q in questions})


# The memory the optional column needs: to run its int8 export, and to build that export first.
OPTIONAL_RUN_BYTES = 1_400_000_000
OPTIONAL_BUILD_BYTES = 3_900_000_000


def optional_model(name: str = OPTIONAL_MODEL) -> tuple[str | None, str]:
    """(`name`, "") when its asset is installed and the memory to run it (or first build it) is
    free; else (None, why not), the phrase the notebooks print in its column."""
    if not store.is_available(get_asset(name)):
        return None, "not installed"
    built = export.is_exported(export.export_dir(name, "int8"))
    need = OPTIONAL_RUN_BYTES if built else OPTIONAL_BUILD_BYTES
    free, where = memory.headroom()
    if free < need:
        return None, (f"skipped: needs {need / 1e9:.2f} GB{'' if built else ' to build it'}, "
                      f"{free / 1e9:.2f} GB free ({where})")
    return name, ""
