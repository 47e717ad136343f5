"""Graded exercises, one module per notebook: `check("nb03.stop_matcher", f)` prints f's verdict."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from chatlab._thirdparty import Graded
from chatlab.errors import ChatlabError


@dataclass(frozen=True)
class Case:
    """One call of the learner's function; `expected` only for an exercise without a reference."""

    args: tuple[object, ...]
    label: str = ""
    expected: object = field(default=None, compare=False)


@dataclass(frozen=True)
class Exercise:
    """`cases(**context)` builds the cases when the check runs (loading a model only then, unless
    `context` holds the notebook's); `reference` gives what each should return, `same` compares."""

    name: str
    cases: Callable[..., list[Case]]
    reference: Callable[..., object] | None = None
    same: Callable[[Graded, Graded], bool] = lambda got, expected: got == expected
    show: Callable[[Graded], str] | None = None


@dataclass(frozen=True)
class Report:
    name: str
    status: str  # "not attempted", "pass" or "fail"
    passed: int
    total: int
    text: str

    @property
    def ok(self) -> bool:
        return self.status == "pass"


_REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    if exercise.name in _REGISTRY:
        raise ChatlabError(f"exercise {exercise.name!r} is registered twice; give each its own name")
    _REGISTRY[exercise.name] = exercise
    return exercise


def _lookup(name: str) -> Exercise:
    module = name.split(".", 1)[0]
    if name not in _REGISTRY and module.isidentifier():
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{module}":
                raise  # the module exists but one of its imports is missing: say that
    if name not in _REGISTRY:
        known = sorted(n for n in _REGISTRY if n.startswith(module + "."))
        hint = f"; {module} has: {', '.join(known)}" if known else \
            "; names look like 'nb03.stop_matcher' (the notebook, a dot, the exercise)"
        raise ChatlabError(f"no exercise named {name!r}{hint}")
    return _REGISTRY[name]


def exercise_names(module: str) -> list[str]:
    """Every exercise a notebook's module registers (importing it), e.g. exercise_names("nb03")."""
    importlib.import_module(f"{__name__}.{module}")
    return sorted(n for n in _REGISTRY if n.startswith(module + "."))


def short(value: Graded, limit: int = 160) -> str:
    """repr for data, the type's name for big objects (a tokenizer's repr is pages long)."""
    if isinstance(value, (str, bytes, int, float, bool, type(None), tuple, list, dict, set)):
        text = repr(value)
    elif hasattr(value, "shape") and hasattr(value, "dtype"):   # a numpy array: small ones in full
        text = (f"array({[round(float(v), 4) for v in value.ravel()]})" if value.size <= 12
                else f"<array {tuple(value.shape)} {value.dtype}>")
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def run(name: str, fn: Callable[..., object], **context: object) -> Report:
    """Grade `fn` on the exercise's cases; never raises for what the learner's code does."""
    ex = _lookup(name)
    if not callable(fn):
        raise ChatlabError(f"check({name!r}, ...) needs the function you wrote, got {short(fn)}")
    show = ex.show or short
    cases = ex.cases(**context)
    passed, failure = 0, None
    for k, case in enumerate(cases, 1):
        got: object = None
        raised = ""  # what the learner's function raised instead of returning
        try:
            got = fn(*case.args)
        except NotImplementedError:
            if k == 1:
                text = (f"○ {name}: not attempted yet: complete the function in the cell above "
                        "(replace `raise NotImplementedError`), run it, then run this cell again")
                return Report(name, "not attempted", 0, len(cases), text)
            raised = "NotImplementedError (part of the function is still a stub)"
        except Exception as err:  # the learner's bug is the verdict, not a traceback
            raised = f"{type(err).__name__}: {err}"
        expected = ex.reference(*case.args) if ex.reference else case.expected
        try:
            ok = not raised and bool(ex.same(got, expected))
        except Exception:  # a value of the wrong type that == cannot compare is a failure
            ok = False
        passed += ok
        if not ok and failure is None:
            args = ", ".join(show(a) for a in case.args)
            failure = (f"  first failure, case {k}{f' ({case.label})' if case.label else ''}:\n"
                       f"    input:    {args}\n    expected: {show(expected)}\n"
                       f"    got:      {f'raised {raised}' if raised else show(got)}")
    if failure is None:
        return Report(name, "pass", passed, len(cases), f"✓ {name}: all {len(cases)} cases pass")
    text = f"✗ {name}: {passed} of {len(cases)} cases pass\n{failure}"
    return Report(name, "fail", passed, len(cases), text)


def check(name: str, fn: Callable[..., object], **context: object) -> None:
    """Print the verdict of `fn` on the named exercise; `context`: objects the notebook holds."""
    print(run(name, fn, **context).text)
