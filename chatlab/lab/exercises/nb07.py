"""Notebook 07's exercises: the strict score, the sentences no method gets, an extractive schema's names."""
from __future__ import annotations

from chatlab.lab.evals import DogCase, load_dogs, score_dog
from chatlab.lab.evals.extraction import MethodScore, Outcome, capitalised_words
from chatlab.lab.exercises import Case, Exercise, register


def is_right_reference(case: DogCase, name: str, color: str) -> bool:
    return score_dog(case, {"name": name, "color": color}).ok


def _is_right_cases() -> list[Case]:
    article = load_dogs()[0]
    shadow = next(c for c in load_dogs() if c.name == "Shadow")   # a multi-word color, with variants
    return [Case((article, "John", "brown"), "the person's name"),
            Case((article, "Harry", "brown beagle"), "a breed inside the color"),
            Case((article, "harry", "Brown"), "case does not matter"),
            Case((article, "Harry", "a brown"), "a leading article is ignored"),
            Case((shadow, "Shadow", "black-and-tan"), "hyphens count as spaces"),
            Case((shadow, "Shadow", "black"), "half a two-word color")]


register(Exercise("nb07.is_right", _is_right_cases, reference=is_right_reference))


def hard_cases_reference(scores: list[MethodScore]) -> list[str]:
    """The ids of the cases every method got wrong, in the set's order."""
    ids = [o.case.id for o in scores[0].outcomes]
    return [i for i in ids if all(not s.outcome(i).ok for s in scores)]


def _synthetic_scores() -> list[MethodScore]:
    cases = load_dogs()[:4]
    right = lambda c: Outcome(c, c.name, c.color)   # noqa: E731 - a one-line helper
    wrong = lambda c: Outcome(c, "Rex", "purple")   # noqa: E731
    return [MethodScore("one", [wrong(cases[0]), right(cases[1]), wrong(cases[2]), right(cases[3])]),
            MethodScore("two", [wrong(cases[0]), wrong(cases[1]), right(cases[2]), wrong(cases[3])]),
            MethodScore("three", [wrong(cases[0]), wrong(cases[1]), wrong(cases[2]), wrong(cases[3])])]


def _hard_cases_cases(scores: list[MethodScore] | None = None) -> list[Case]:
    made = _synthetic_scores()
    cases = [Case((made,), "three made-up methods: only the first case beats them all"),
             Case((made[2:],), "one method that gets nothing right")]
    if scores:
        cases.append(Case((scores,), "the notebook's table"))
    return cases


register(Exercise("nb07.hard_cases", _hard_cases_cases, reference=hard_cases_reference,
                  same=lambda got, expected: list(got) == list(expected)))


register(Exercise("nb07.name_candidates", lambda: [
    Case((load_dogs()[0].text,), "the article's sentence"),
    Case(("Shadow, our black-and-tan dachshund, hides under the sofa.",), "one name"),
    Case(("Tilly's dog Biscuit barks at Tilly.",), "a possessive, and a name twice"),
    Case(("the dog sleeps.",), "no capitalised word"),
], reference=capitalised_words, same=lambda got, expected: list(got) == list(expected)))
