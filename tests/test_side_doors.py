"""No side doors: the chat widget, fine-tune evaluation and the serving bench run through a
ChatEngine (its plan, its token source, the lease), not the loop on the side. No model loaded."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chatlab.engine import ChatEngine, parse_request
from chatlab.lab.evals.controls import ScriptedBackend

PACKAGE = Path(__file__).resolve().parents[1] / "chatlab"
# Who may call the loop itself: the engine's loop source; `chatlab bench`'s chatlab-loop engine,
# which times the bare loop on ids rendered once in the parent, as the other runtimes' own
# generate() calls are timed (a plan would time rendering too, on one side only); and the live
# bites of notebooks 01-04 (evals/bites.py), which feed the loop deliberately wrong ids (split
# role markers, no stop ids) to show the bug the engine's plan prevents; and bench/replay.py,
# which records plain greedy replies on the bench's own rendered ids (what the replay models).
# The engine, and the lab's measurements that time or compare the bare loop on purpose.
LOOP_CALLERS = {"engine/engine.py", "generate/__init__.py", "lab/bench/engines.py", "lab/evals/bites.py",
                "lab/bench/replay.py", "lab/bench/accuracy.py"}


def scripted_tokenizer():  # noqa: ANN201
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    return tokenizer_for(get_template("qwen2.5"))


def test_only_the_engine_imports_the_loop() -> None:
    importers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chatlab.generate") \
                    and any(a.name == "generate" for a in node.names):
                importers.add(str(path.relative_to(PACKAGE)))
    assert importers <= LOOP_CALLERS, importers - LOOP_CALLERS


def test_the_widget_runs_each_turn_as_an_engine_request() -> None:
    pytest.importorskip("ipywidgets")
    from chatlab.lab.widgets import ChatWidget

    backend = ScriptedBackend(scripted_tokenizer(), ["Lemons are sour.", "Yes."])
    engine = ChatEngine(backend, "scripted")
    chat = ChatWidget(engine, system="Be brief.")
    assert chat.engine is engine  # a given engine is shared, not copied
    assert chat.send("What are lemons?", seed=0, echo=False) == "Lemons are sour."
    lease = engine.guard.current
    assert lease is not None and lease.done  # taken for the turn and released after it
    chat.max_tokens.value = 2  # the slider reaches the plan: "Yes." is two tokens, then eos
    chat.send("Sure?", echo=False)
    assert chat.last is not None and (chat.last.completion_tokens, chat.last.finish_reason) == (2, "length")
    # what the model saw for turn two is the engine's own plan of the same conversation
    plan = engine.check(parse_request({"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "What are lemons?"},
        {"role": "assistant", "content": "Lemons are sour."}, {"role": "user", "content": "Sure?"}]}))
    assert backend.prompts[-1] == list(plan.prompt_ids)


def test_the_widget_refuses_a_turn_the_engine_refuses() -> None:
    pytest.importorskip("ipywidgets")
    from chatlab.errors import ChatlabError
    from chatlab.lab.widgets import ChatWidget

    chat = ChatWidget(ScriptedBackend(scripted_tokenizer(), ["x"], context_length=64), "scripted")
    chat.max_tokens.value = 1000  # more than the 64-token window holds
    with pytest.raises(ChatlabError, match="context window"):
        chat.send("hello", echo=False)
    assert chat.history == []  # a refused turn leaves no half turn behind


def test_the_serving_bench_times_the_engine() -> None:
    from chatlab.generate import Finished
    from chatlab.lab.bench import serving as bench

    backend = ScriptedBackend(scripted_tokenizer(), ["one two three four five six seven eight"] * 4)
    engine = ChatEngine(backend, "scripted")
    assert bench.raw_rate(engine, 4) > 0
    plan = bench.chat_plan(engine, {"messages": bench.STORY_CHAT, "max_tokens": 3, "temperature": 0})
    last = bench.token_events(engine, plan)[-1]
    assert isinstance(last, Finished) and last.completion_tokens == 3
    assert bench.pipeline_rate(engine, [plan]) > 0
    assert backend.prompts[-1] == list(plan.prompt_ids)
