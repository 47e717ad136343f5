"""Extraction methods for `evaluate`, built on langchain: each is a function text -> object.

Only what would otherwise be boilerplate in a notebook cell lives here: the article's legacy
chain (with its own prompt, and langchain's deprecation warning silenced for that one call), and
a prompt-then-model pipeline wrapped to take plain text. The notebook builds the modern methods
itself (`llm.with_structured_output(...)`), because those calls are what it teaches.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

__all__ = ["ARTICLE_SYSTEM", "ARTICLE_HUMAN", "article_chain", "prompted"]

# The RTP-LLM article's prompt for create_structured_output_chain, as it wrote it.
ARTICLE_SYSTEM = "You are a world class algorithm for extracting information in structured formats."
ARTICLE_HUMAN = "Use the given format to extract information from the following input: {input}"


def article_chain(schema: type, llm: Any) -> Callable[[str], Any]:
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


def prompted(system: str, runnable: Any, human: str = "Sentence: {input}") -> Callable[[str], Any]:
    """`system` + `human` (with `{input}`) piped into `runnable` (e.g. a with_structured_output
    model). Braces in `system` are literal text, not template slots, so JSON examples can be
    written as they are."""
    from langchain_core.prompts import ChatPromptTemplate

    literal = system.replace("{", "{{").replace("}", "}}")
    chain = ChatPromptTemplate.from_messages([("system", literal), ("human", human)]) | runnable
    return lambda text: chain.invoke({"input": text})
