"""Notebook 08's exercises: hit@k, a question that finds the stop-word notes, what the model lost."""
from __future__ import annotations

from typing import Callable

from chatlab.lab.evals.retrieval import hit_share
from chatlab.lab.exercises import Case, Exercise, register


def _hit_cases() -> list[Case]:
    ranked = [["Stop strings end a reply.", "Tools are listed."],
              ["Tools are listed.", "The server answers 429 when full."],
              ["Templates render ids.", "Stop strings end a reply."]]
    quotes = ["stop strings end", "answers 429", "tokens split"]
    return [Case((ranked, quotes, 1), "k=1"), Case((ranked, quotes, 2), "k=2"),
            Case((ranked, quotes, 5), "k larger than the list"),
            Case(([["A  line\nbroken"]], ["a line broken"], 1), "spacing and case are ignored")]


register(Exercise("nb08.hit_at_k", _hit_cases, reference=hit_share,
                  same=lambda got, expected: abs(float(got) - expected) < 1e-9))

# The retriever the notebook passes in; `same` needs it to look the learner's question up.
_TOP_FILE: dict[str, Callable[[str], str]] = {}


def _asks_stop_words(question: object, want: str) -> bool:
    return (isinstance(question, str) and "stop" in question.lower()
            and _TOP_FILE["fn"](question) == want)


def _stop_cases(top_file: Callable[[str], str] | None = None) -> list[Case]:
    if top_file is None:
        raise ValueError("pass the notebook's retriever: check('nb08.stop_question', f, top_file=top_file)")
    _TOP_FILE["fn"] = top_file
    return [Case((top_file,), "a question about stop words, whose top passage is in stop_words.md",
                 expected="stop_words.md")]


register(Exercise("nb08.stop_question", _stop_cases, same=_asks_stop_words))


def model_lost_reference(retrieved: dict[str, bool], keyed: dict[str, bool]) -> list[str]:
    """Ids whose gold passage was retrieved but whose answer holds no key phrase, in order."""
    return [i for i in retrieved if retrieved[i] and not keyed[i]]


def _lost_cases(retrieved: dict[str, bool] | None = None, keyed: dict[str, bool] | None = None) -> list[Case]:
    cases = [Case(({"q1": True, "q2": True, "q3": False}, {"q1": True, "q2": False, "q3": False}),
                  "q3 was never retrieved: the retriever lost it, not the model"),
             Case(({"q1": False}, {"q1": True}), "a key phrase without the passage"),
             Case(({"a": True, "b": True}, {"a": False, "b": False}), "both lost by the model")]
    if retrieved is not None and keyed is not None:
        cases.append(Case((retrieved, keyed), "the notebook's questions"))
    return cases


register(Exercise("nb08.model_lost", _lost_cases, reference=model_lost_reference,
                  same=lambda got, expected: list(got) == list(expected)))
