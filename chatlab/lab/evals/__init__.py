"""Small evaluation sets (data/eval/, see its README) and their scoring, for notebooks 07 and 08."""
from __future__ import annotations

import datetime as dt

from chatlab.backends.precision import cpu_info
from chatlab.lab.evals.extraction import controls_table, evaluate, markdown_table, normalize, score_dog
from chatlab.lab.evals.retrieval import answer_has_key, contains, hit_at_k, hits, split_passages, trim_repeats
from chatlab.lab.evals.sets import (DogCase, Question, load_dogs, load_facts, load_questions,
                                    load_weather_requests)

__all__ = ["DogCase", "Question", "load_dogs", "load_questions", "load_facts", "load_weather_requests",
           "measured_on", "normalize", "score_dog", "evaluate", "markdown_table", "controls_table",
           "split_passages", "contains", "hits", "hit_at_k", "answer_has_key", "trim_repeats"]


def measured_on(today: dt.date | None = None) -> str:
    """'2 cores, <CPU model>, YYYY-MM-DD' (this process's cores, the CPU, the UTC date): the line
    the notebooks print beside every stored timing, which means little without its machine."""
    info = cpu_info()
    day = today or dt.datetime.now(dt.timezone.utc).date()
    cores = info["threads"]
    return f"{cores} core{'s' if cores != 1 else ''}, {info['model']}, {day.isoformat()}"
