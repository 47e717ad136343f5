"""Extraction methods for `evaluate`, built on langchain: each is a function text -> object.

Only what would be boilerplate in a notebook cell lives here; the notebook builds the modern
methods itself (`llm.with_structured_output(...)`), because those calls are what it teaches.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Callable, Sequence

from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import Runnable


# The RTP-LLM article's prompt for create_structured_output_chain, as it wrote it.
ARTICLE_SYSTEM = "You are a world class algorithm for extracting information in structured formats."
ARTICLE_HUMAN = "Use the given format to extract information from the following input: {input}"


def article_chain(schema: type, llm: "BaseChatModel") -> Callable[[str], object]:
    """The article's way: `create_structured_output_chain` (legacy `functions` +
    `function_call`), from langchain-classic since langchain 1.0 removed it."""
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
    """`system`, then each example as a user turn (`human` filled with its input) and an
    assistant turn (its answer), then the real input, piped into `runnable` (e.g. a
    with_structured_output model). Examples as turns, not as text inside the system prompt:
    a small model copies the last example of a list, but continues a conversation."""
    from langchain_core.prompts import ChatPromptTemplate

    if "{input}" not in human:
        raise ChatlabError(f"human={human!r} has no {{input}} slot; write e.g. 'Sentence: {{input}}'")
    turns: list[tuple[str, str]] = [("system", _literal(system))]
    for given, answer in examples:
        turns += [("human", _literal(human.replace("{input}", given))), ("ai", _literal(answer))]
    chain = ChatPromptTemplate.from_messages([*turns, ("human", human)]) | runnable
    return lambda text: chain.invoke({"input": text})


def streamed_call(schema: type, llm: "BaseChatModel") -> Callable[[str], object]:
    """Way (d): `bind_tools([schema])` with the tool named, streamed; the tool-call chunks are
    added up the way langchain adds them, and the one call's arguments fill `schema`. A stream
    that ends without a call is an error (a wrong answer in the table), not an empty object."""
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
