"""Chat tasks that copy from their prompt, and one that does not: where speculation pays.

Prompt-lookup drafts (chatlab.generate.speculate) help exactly when the reply repeats spans of
the prompt. These shapes come from the project's own eval sets, so the bench measures the
kind of text the notebooks generate:

* `extract`: notebook 07's dog sentences, answered as JSON (names and colours are copied);
* `rag`: notebook 08's questions with the passage that answers them (answers quote it);
* `rewrite`: a paragraph of data/docs to rewrite in simpler words (most words stay);
* `story`: a free story with no source text (nothing to copy: the break-even case).

Each task yields chat message lists; `task_prompts` renders them with the model's template.
"""
from __future__ import annotations


from chatlab._thirdparty import HFTokenizer
from chatlab.data import data_path
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.lab.evals.retrieval import Passage, contains, split_passages
from chatlab.lab.evals.sets import load_dogs, load_questions

TASKS = ["extract", "rag", "rewrite", "story"]
COPY_TASKS = ["extract", "rag", "rewrite"]

STORY_TOPICS = ["a lighthouse keeper who finds a lost kite", "a robot learning to bake bread",
                "two foxes planning a winter journey", "a village where it never stops raining"]


def task_messages(task: str) -> list[list[dict[str, str]]]:
    """The message lists of one task, in a fixed order (every case of its eval set)."""
    if task == "extract":
        return [[{"role": "user", "content": "Extract the dog's name and colour from this text "
                  "and answer with JSON like {\"name\": ..., \"color\": ...}, then quote the "
                  f"sentence that says so.\n\nText: {case.text}"}] for case in load_dogs()]
    if task == "rag":
        return [[{"role": "user", "content": f"Answer the question from the passage, quoting it."
                  f"\n\nPassage: {passage}\n\nQuestion: {question}"}]
                for question, passage in questions_with_passages()]
    if task == "rewrite":
        return [[{"role": "user", "content": "Rewrite this paragraph in simpler words, keeping "
                  f"its meaning:\n\n{p.text}"}] for p in _paragraphs()]
    if task == "story":
        return [[{"role": "user", "content": f"Write a short story about {topic}."}]
                for topic in STORY_TOPICS]
    raise UnknownNameError("bench task", task, TASKS)


def questions_with_passages() -> list[tuple[str, str]]:
    passages = split_passages(data_path("docs"))
    out = []
    for q in load_questions():
        found = [p.text for p in passages if p.file == q.file and contains(p.text, q.quote)]
        if not found:
            raise ChatlabError(f"question {q.id}: no passage of {q.file} contains its quote; fix "
                               "data/eval/questions.jsonl")
        out.append((q.question, found[0]))
    return out


def _paragraphs(min_chars: int = 200, max_chars: int = 900) -> list[Passage]:
    """Paragraphs of data/docs long enough to rewrite, short enough for a small model."""
    return [p for p in split_passages(data_path("docs"))
            if min_chars <= len(p.text) <= max_chars and not p.text.lstrip().startswith(("```", "|"))]


def task_prompts(tokenizer: HFTokenizer, task: str, limit: int | None = None) -> list[list[int]]:
    """The task's prompts as ids, rendered with the tokenizer's chat template."""
    out = []
    for messages in task_messages(task)[:limit]:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        out.append([int(i) for i in ids])
    return out
