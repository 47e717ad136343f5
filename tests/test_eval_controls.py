"""Positive controls: gold answers replayed through the real server, client and scorer reach
100%, a prompt the oracle cannot place is counted, and the held-out facts score what they say."""
from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from chatlab import data_path
from chatlab.errors import ChatlabError
from chatlab.lab.evals import controls_table, evaluate, load_dogs, load_questions
from chatlab.lab.evals.controls import OracleBackend, dog_call, dog_oracle, listed_tool, rag_gold
from chatlab.lab.evals.sets import fact_rate, load_heldout, states_fact
from chatlab.lab.evals.extraction import MethodScore, Outcome


class Dog(BaseModel):
    """Identifying information about a dog."""
    name: str = Field(description="The dog's name")
    color: str = Field(description="The dog's color")


@pytest.fixture(scope="module")
def hermes_tokenizer():
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    return tokenizer_for(get_template("qwen2.5"))


def test_the_oracle_answers_every_way_of_asking_right(hermes_tokenizer) -> None:
    """json_schema, a named tool and the streamed tool call, through langchain and the server:
    the gold answers come back intact, so a lower score elsewhere is the model's."""
    from langchain_openai import ChatOpenAI

    from chatlab.engine import ChatEngine
    from chatlab.lab.evals.extraction import streamed_call
    from chatlab.serve import start_server

    cases = load_dogs()[:4]
    oracle = dog_oracle(hermes_tokenizer, cases)
    with start_server(ChatEngine(oracle, "oracle", template="qwen2.5")) as server:
        llm = ChatOpenAI(base_url=server.url, api_key="unused", model="oracle", temperature=0,
                         max_tokens=60, max_retries=0)
        scores = evaluate({"json": llm.with_structured_output(Dog).invoke,
                           "tools": llm.with_structured_output(Dog, method="function_calling").invoke,
                           "stream": streamed_call(Dog, llm)}, cases)
    assert [s.accuracy for s in scores] == [1.0, 1.0, 1.0], [(s.method, s.wrong()) for s in scores]
    assert oracle.misses == 0 and oracle.placed == len(oracle.prompts) == 12


def test_a_prompt_without_a_known_case_is_a_miss(hermes_tokenizer) -> None:
    oracle = OracleBackend(hermes_tokenizer, {"alpha question": "alpha answer"})
    ids = list(hermes_tokenizer.encode("something else entirely", add_special_tokens=False))
    oracle.prefill(ids)
    assert oracle.misses == 1
    oracle.prefill(list(hermes_tokenizer.encode("first beta, then alpha question", add_special_tokens=False)))
    assert oracle.misses == 1 and oracle.placed == 1 and hermes_tokenizer.decode(oracle._ids) == "alpha answer"
    with pytest.raises(ChatlabError, match="at least one"):
        OracleBackend(hermes_tokenizer, {})


def test_the_last_case_in_the_prompt_wins(hermes_tokenizer) -> None:
    oracle = OracleBackend(hermes_tokenizer, {"dog one": "A", "dog two": "B"})
    assert oracle.case_in("example: dog two ... now: dog one") == "dog one"
    assert oracle.case_in("no dog here") is None


def test_the_legacy_chain_wrapper_is_filled_as_its_schema_asks() -> None:
    tool = {"name": "_OutputFormatter", "parameters": {"properties": {"output": {"type": "object"}}}}
    prompt = "<tools>\n" + json.dumps({"type": "function", "function": tool}) + "\n</tools>"
    assert listed_tool(prompt)["name"] == "_OutputFormatter"
    call = dog_call(prompt, '{"name": "Harry", "color": "brown"}')
    assert '"name": "_OutputFormatter", "arguments": {"output": {"name": "Harry"' in call
    assert dog_call("no tools here", "{}") is None


def test_every_rag_gold_answer_holds_a_key_phrase() -> None:
    from chatlab.lab.evals import answer_has_key

    for q in load_questions():
        assert answer_has_key(rag_gold(q), q), q.id


def test_a_gold_answer_quoting_a_control_token_is_replayed_as_text(hermes_tokenizer) -> None:
    """Gold text holding "<|im_end|>" is encoded in ordinary pieces: replayed as the control id
    it would end the turn there, and the control would lose an answer the model could give."""
    oracle = OracleBackend(hermes_tokenizer, {"q": "wrap it in <|im_start|> and <|im_end|>"})
    oracle.prefill(list(hermes_tokenizer.encode("q", add_special_tokens=False)))
    special = set(hermes_tokenizer.all_special_ids)
    assert oracle._ids and not special & set(oracle._ids)
    assert hermes_tokenizer.decode(oracle._ids) == "wrap it in <|im_start|> and <|im_end|>"


def test_heldout_facts_and_gold_answers() -> None:
    rows = load_heldout(data_path("finetune", "heldout.jsonl"))
    assert len(rows) == 20 and all(r.gold.endswith("Arr!") for r in rows)
    right, checked = fact_rate([r.gold for r in rows], rows)
    assert right == checked >= 16  # every gold answer states its fact
    assert not states_fact("A bicycle has eight wheels, one for each axle. Arr!", rows[1].facts)
    assert states_fact("Caterpillars become Butterflies", ("butterfl",))
    assert not states_fact("there are 12 of them", ("2",))
    with pytest.raises(ChatlabError, match="in pairs"):
        fact_rate(["x"], rows)


def test_controls_table_shows_missing_columns_as_missing() -> None:
    case = load_dogs()[0]
    good = MethodScore("(b)", [Outcome(case, case.name, case.color)])
    bad = MethodScore("(b)", [Outcome(case, "John", "brown")])
    table = controls_table({"oracle": [good], "SmolLM2": [bad], "Qwen (optional)": "not installed"})
    assert "| (b) | 1/1 | 0/1 | not installed |" in table
    with pytest.raises(ChatlabError):
        controls_table({"x": "not installed"})


def test_the_finetune_control_replays_gold_through_the_loop(smollm2_tokenizer) -> None:
    """Notebook 09's ceiling: gold answers through ft.answers (the loop, the training template's
    stop ids) score 100% on persona and facts; a wrong answer in the script lowers the facts."""
    from chatlab.lab import finetune as ft
    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.render import resolve
    from chatlab.render.io import load_template
    from chatlab.render.compose import as_messages

    data = data_path("finetune")
    res = resolve(smollm2_tokenizer, template=load_template(data / "captain_byte.llamafactory.json", "llamafactory"))
    rows = load_heldout(data / "heldout.jsonl")[:4]
    chats = ft.load_chats(data / "heldout.jsonl")[:4]
    script = [r.gold for r in rows]
    got = ft.answers(None, smollm2_tokenizer, res, chats, max_new_tokens=40,
                     backend=ScriptedBackend(smollm2_tokenizer, script))
    assert [a.text for a in got] == script and ft.persona_rate(got) == 1.0
    assert fact_rate(got, rows) == (4, 4)
    script[1] = "A bicycle has eight wheels, one for each axle. Arr!"
    wrong = ft.answers(None, smollm2_tokenizer, res, chats, max_new_tokens=40,
                       backend=ScriptedBackend(smollm2_tokenizer, script))
    assert ft.persona_rate(wrong) == 1.0 and fact_rate(wrong, rows) == (3, 4)
    # chats given as chatlab Messages are the same requests as the dicts they came from
    typed = ft.answers(None, smollm2_tokenizer, res, [as_messages(c) for c in chats], max_new_tokens=40,
                       backend=ScriptedBackend(smollm2_tokenizer, script))
    assert [a.token_ids for a in typed] == [a.token_ids for a in wrong]
