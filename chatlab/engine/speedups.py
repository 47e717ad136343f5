"""Doing less work per token: what `chatlab complete`, `serve` and the bench ask the engine for.

Prompt-lookup speculative decoding (chatlab.generate.speculate: `--speculate prompt-lookup` with
`--draft-tokens K`, `--ngram N`) and reuse of the previous turns' KV cache (chatlab.engine.prefix,
`--reuse-prefix`), turned into the engine's load keywords for a backend. The flags themselves are
declared in chatlab.cli.args.
"""
from __future__ import annotations

from chatlab._thirdparty import LoaderOption
from chatlab.backends.registry import get_spec
from chatlab.generate.speculate import Speculation


def speculation(method: str | None, draft_tokens: int, ngram: int) -> Speculation | None:
    """The Speculation asked for (ChatlabError for a value out of range), or None without a method."""
    if method is None:
        return None
    return Speculation(method, draft_tokens=draft_tokens, ngram=ngram)


def speedup_options(backend: str, spec: Speculation | None, reuse: bool) -> dict[str, LoaderOption]:
    """The engine's load keywords for a backend. On a batched backend reuse is its own prefix
    caching; speculation drives chatlab's loop only, so load_engine refuses it there (genai has
    a prompt lookup of its own, which the bench's genai-int8-pl row runs; the server's genai
    path does not turn it on)."""
    out: dict[str, LoaderOption] = {}
    if reuse and get_spec(backend).source == "batched":
        out["prefix_caching"] = True
        reuse = False
    if spec is not None:
        out["speculate"] = spec
    if reuse:
        out["reuse_prefix"] = True
    return out
