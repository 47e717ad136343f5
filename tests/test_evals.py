"""The eval sets and their scoring, without a model: plain data, fake methods and retrievers,
and the real server on a ScriptedBackend for the langchain path."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatlab import data_path
from chatlab.errors import ChatlabError
from chatlab.lab.evals import (DogCase, Question, answer_has_key, evaluate, hit_at_k, hits, load_dogs,
                           load_questions, markdown_table, normalize, score_dog, split_passages,
                           trim_repeats)


class Dog(BaseModel):
    name: str
    color: str


# -- the sets ---------------------------------------------------------------------------------
def test_dog_set_is_big_enough_and_holds_the_article_sentence() -> None:
    cases = load_dogs()
    assert len(cases) >= 30
    (article,) = [c for c in cases if c.source == "article"]
    assert article.text.startswith("John had a dog named Harry")
    assert (article.name, article.color) == ("Harry", "brown")
    for c in cases:  # unambiguous: the gold name is in the sentence, and so is the color
        assert c.name in c.text, c.id
        assert any(normalize(col) in normalize(c.text) for col in (c.color, *c.accept_color)), c.id


def test_question_set_points_at_one_passage_each_with_its_key_phrases() -> None:
    questions = load_questions()
    passages = split_passages(data_path("docs"))
    assert len(questions) >= 20
    for q in questions:
        holding = [p for p in passages if p.file == q.file and
                   " ".join(q.quote.lower().split()) in " ".join(p.text.lower().split())]
        assert len(holding) == 1, f"{q.id}: the quote must identify exactly one passage of {q.file}"
        assert answer_has_key(holding[0].text, q), f"{q.id}: no key phrase is in its own passage"


@pytest.mark.parametrize("line, needle", [
    ("not json", "not JSON"),
    ("[1, 2]", "not an object"),
    ('{"id": "x", "text": "t", "name": "", "color": "c"}', "'name' must be a non-empty string"),
    ('{"id": "x", "text": "t", "name": "n", "color": "c", "accept_color": "grey"}', "'accept_color'"),
])
def test_a_bad_dog_row_names_its_line_and_field(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "dogs.jsonl"
    path.write_text('{"id": "a", "text": "t", "name": "n", "color": "c"}\n' + line + "\n")
    with pytest.raises(ChatlabError, match="line 2") as err:
        load_dogs(path)
    assert needle in str(err.value)


def test_duplicate_ids_and_empty_answers_are_refused(tmp_path: Path) -> None:
    row = {"id": "q", "question": "?", "file": "f.md", "quote": "x", "answer": ["a"]}
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ChatlabError, match="appears twice"):
        load_questions(path)
    path.write_text(json.dumps({**row, "answer": []}) + "\n")
    with pytest.raises(ChatlabError, match="non-empty list"):
        load_questions(path)


# -- extraction scoring -----------------------------------------------------------------------
CASE = DogCase("d1", "Shadow, our black-and-tan dachshund, hides.", "Shadow", "black and tan",
               ("black-and-tan",))


@pytest.mark.parametrize("name, color, ok", [
    ("Shadow", "black and tan", True),
    ("shadow.", "Black-and-Tan", True),     # case, hyphens, end punctuation
    ("Shadow", "the black and tan", True),  # a leading article
    ("Shadow", "black", False),             # part of the color is not the color
    ("Shadow", "black and tan dachshund", False),  # a breed is not a color
    ("Dog", "black and tan", False),        # the schema's title is not a name
])
def test_scoring_is_strict_but_ignores_spelling_noise(name: str, color: str, ok: bool) -> None:
    assert score_dog(CASE, Dog(name=name, color=color)).ok is ok
    assert score_dog(CASE, {"name": name, "color": color}).ok is ok  # a dict scores the same


def test_evaluate_counts_errors_as_wrong_and_keeps_them() -> None:
    cases = [CASE, DogCase("d2", "Rex is tan.", "Rex", "tan")]

    def flaky(text: str) -> Dog:
        if text.startswith("Rex"):
            raise ValueError("server said 400")
        return Dog(name="Shadow", color="black-and-tan")

    (score,) = evaluate({"flaky": flaky}, cases)
    assert [o.ok for o in score.outcomes] == [True, False]
    assert score.errors == 1 and "server said 400" in score.outcome("d2").error
    assert score.accuracy == 0.5 and score.name_accuracy == 0.5
    table = markdown_table([score], focus="d1")
    assert "| flaky | 1/2 (50%) | 50% | 50% | 1 |" in table and "✓ 'Shadow', 'black-and-tan'" in table
    with pytest.raises(ChatlabError, match="no outcome"):
        score.outcome("nope")


def test_evaluate_on_the_real_server_through_langchain() -> None:
    """The notebook's path without a model: langchain -> server -> engine on a scripted
    backend, whose replies are the model's; the score reflects what came back."""
    from langchain_openai import ChatOpenAI

    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for
    from chatlab.serve import start_server

    replies = ['{"name": "Harry", "color": "brown"}', '{"name": "John", "color": "brown beagle"}']
    backend = ScriptedBackend(tokenizer_for(get_template("chatml")), replies)
    cases = load_dogs()[:2]
    with start_server(ChatEngine(backend, "scripted", template="chatml")) as server:
        llm = ChatOpenAI(base_url=server.url, api_key="unused", model="scripted", temperature=0,
                         max_tokens=40, max_retries=0)
        (score,) = evaluate({"json_schema": llm.with_structured_output(Dog).invoke}, cases)
    assert [(o.name, o.color) for o in score.outcomes] == [("Harry", "brown"), ("John", "brown beagle")]
    assert [o.ok for o in score.outcomes] == [True, False]


# -- retrieval and answers --------------------------------------------------------------------
def test_passages_are_paragraphs_with_their_heading() -> None:
    passages = split_passages(data_path("docs"))
    assert {p.file for p in passages} == {"chat_templates.md", "function_calling.md", "serving.md",
                                          "stop_words.md"}
    assert all(not p.text.startswith("#") and p.heading for p in passages)
    first = passages[0]
    assert first.heading == "Chat templates" and first.text.startswith("A chat model never sees")
    with pytest.raises(ChatlabError, match="no \\*.md files"):
        split_passages(Path(__file__).parent / "nowhere")


def test_hit_at_k_counts_the_gold_passage_in_the_top_k() -> None:
    qs = [Question("a", "qa", "f", "alpha beta", ("x",)), Question("b", "qb", "f", "gamma", ("x",))]
    ranking = {"qa": ["ALPHA\nbeta here", "other"], "qb": ["other", "more", "gamma"]}
    retrieve = lambda question, k: ranking[question][:k]  # noqa: E731
    assert hit_at_k(retrieve, qs, ks=(1, 3)) == {1: 0.5, 3: 1.0}
    assert hits(retrieve, qs, 2) == [True, False]
    with pytest.raises(ChatlabError, match="k >= 1"):
        hits(retrieve, qs, 0)


def test_answer_checks_and_the_repetition_trim() -> None:
    q = Question("q", "?", "f", "quote", ("<|im_end|>", "151645"))
    assert answer_has_key("It ends with <|IM_END|>.", q) and not answer_has_key("It ends.", q)
    looped = "The server can parse it. It matches the schema. The server can parse it. The"
    assert trim_repeats(looped) == "The server can parse it. It matches the schema."
    assert trim_repeats("One. Two.") == "One. Two."
    cut_off = "It stops at the end of its output. It stops at the end of its output,"
    assert trim_repeats(cut_off) == "It stops at the end of its output."
    assert trim_repeats("It stops. It stops at the end.") == "It stops. It stops at the end."


# -- quiet loading (the notebooks' load residue) ------------------------------------------------
def test_quiet_loading_silences_transformers_only_inside_the_block() -> None:
    from transformers.utils import logging

    from chatlab.models import quiet_loading

    before = (logging.get_verbosity(), logging.is_progress_bar_enabled())
    with quiet_loading():
        assert logging.get_verbosity() == logging.ERROR and not logging.is_progress_bar_enabled()
    assert (logging.get_verbosity(), logging.is_progress_bar_enabled()) == before


def test_load_embedding_refuses_a_chat_model_by_name() -> None:
    from chatlab.errors import UnknownNameError
    from chatlab.models import load_embedding

    with pytest.raises(UnknownNameError, match="minilm-l6-v2"):
        load_embedding("smollm2-135m-instruct")


# -- langchain method builders, against the real server on a scripted backend -------------------
def test_article_chain_and_prompted_few_shot_reach_the_model(recwarn: pytest.WarningsRecorder) -> None:
    from langchain_openai import ChatOpenAI

    from chatlab.lab.evals.controls import ScriptedBackend
    from chatlab.engine import ChatEngine
    from chatlab.lab.evals.extraction import ARTICLE_SYSTEM, article_chain, prompted
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for
    from chatlab.serve import start_server

    call = ('<tool_call>\n{"name": "_OutputFormatter", "arguments": {"output": {"name": "Harry", '
            '"color": "brown"}}}\n</tool_call>')
    backend = ScriptedBackend(tokenizer_for(get_template("qwen2.5")), [call, '{"name": "Rex", "color": "tan"}'])
    with start_server(ChatEngine(backend, "scripted", template="qwen2.5")) as server:
        llm = ChatOpenAI(base_url=server.url, api_key="unused", model="scripted", temperature=0,
                         max_tokens=60, max_retries=0)
        legacy = article_chain(Dog, llm)
        assert legacy("John had a dog named Harry") == Dog(name="Harry", color="brown")
        few_shot = prompted('Example: {"name": "Jet"}', llm.with_structured_output(Dog))
        assert few_shot("Rex, the police dog, is tan.") == Dog(name="Rex", color="tan")
    assert not [w for w in recwarn if "deprecat" in str(w.message).lower()]  # silenced, narrowly
    first, second = (backend.tokenizer.decode(ids) for ids in backend.prompts)
    assert ARTICLE_SYSTEM in first and "John had a dog named Harry" in first
    assert 'Example: {"name": "Jet"}' in second and "Sentence: Rex, the police dog" in second


# -- the extractive schema ----------------------------------------------------------------------
def test_span_schema_offers_only_pieces_of_the_sentence() -> None:
    from chatlab.lab.evals.extraction import capitalised_words, span_schema, word_runs

    text = "Tilly's dog is called Nugget and he is as jet-black as coal."
    assert capitalised_words(text) == ["Tilly", "Nugget"]
    runs = word_runs(text)
    assert "jet-black" in runs and "as jet-black as" in runs and "nugget and he is" not in runs
    schema = span_schema(text)
    assert schema["properties"]["name"]["enum"] == ["Tilly", "Nugget"]
    # every gold answer of the set is reachable: otherwise the schema would forbid the truth
    for case in load_dogs():
        s = span_schema(case.text)["properties"]
        assert case.name in s["name"]["enum"], case.id
        assert any(normalize(c) in {normalize(r) for r in s["color"]["enum"]}
                   for c in (case.color, *case.accept_color)), case.id
    with pytest.raises(ChatlabError, match="no capitalised word"):
        span_schema("a brown dog")


def test_prompted_sends_examples_as_turns_and_needs_an_input_slot() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from chatlab.lab.evals.extraction import prompted

    seen: list[Any] = []
    model = FakeListChatModel(responses=["ok"])
    run = prompted("rules {x}", lambda messages: seen.append(messages) or "done",
                   examples=[("Rex is tan.", '{"name": "Rex"}')])
    assert run("Ziggy is black.") == "done"
    roles = [(m.type, m.content) for m in seen[0].to_messages()]
    assert roles == [("system", "rules {x}"), ("human", "Sentence: Rex is tan."),
                     ("ai", '{"name": "Rex"}'), ("human", "Sentence: Ziggy is black.")]
    assert model  # the fake is only there to show any runnable works; a lambda is one too
    with pytest.raises(ChatlabError, match="no \\{input\\} slot"):
        prompted("rules", model, human="Sentence:")
