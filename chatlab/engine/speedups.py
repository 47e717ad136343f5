"""The flags for doing less work per token, shared by `chatlab complete`, `serve` and the bench.

`--speculate prompt-lookup` (with `--draft-tokens K`, `--ngram N`) turns on prompt-lookup
speculative decoding (chatlab.generate.speculate); `--reuse-prefix` keeps the previous turns'
KV cache (chatlab.engine.prefix). Kept in one place so each command adds them with one call.
"""
from __future__ import annotations

import argparse
from chatlab._thirdparty import LoaderOption
from chatlab.backends.registry import get_spec
from chatlab.generate.speculate import DRAFT_TOKENS_RANGE, METHODS, NGRAM_RANGE, Speculation


def add_speedup_args(p: argparse.ArgumentParser, reuse: bool = True) -> None:
    p.add_argument("--speculate", choices=METHODS, default=None,
                   help="speculative decoding: prompt-lookup drafts tokens by matching the last "
                        "n-gram against the prompt and reply (torch, or openvino paged)")
    p.add_argument("--draft-tokens", type=int, default=Speculation.draft_tokens,
                   help=f"with --speculate: the longest guess per verify pass (openvino pads every "
                        f"pass to 1+K tokens; torch sizes each guess by how the last one went; "
                        f"{DRAFT_TOKENS_RANGE[0]}..{DRAFT_TOKENS_RANGE[1]}, default {Speculation.draft_tokens})")
    p.add_argument("--ngram", type=int, default=3,
                   help=f"with --speculate: the longest suffix looked up "
                        f"({NGRAM_RANGE[0]}..{NGRAM_RANGE[1]}, default 3)")
    if reuse:
        p.add_argument("--reuse-prefix", action="store_true",
                       help="keep earlier turns' KV cache: a resent conversation prefills only "
                            "its new tokens (torch, or openvino paged)")


def speculation_from_args(args: argparse.Namespace) -> Speculation | None:
    """The Speculation the flags ask for (ChatlabError for a value out of range), or None."""
    if "speculate" not in args or args.speculate is None:
        return None
    return Speculation(args.speculate, draft_tokens=args.draft_tokens, ngram=args.ngram)


def speedups_from_args(args: argparse.Namespace) -> dict[str, LoaderOption]:
    """The engine's load keywords for the flags. On a batched backend, --reuse-prefix is its
    own prefix caching; --speculate drives chatlab's loop only, so load_engine refuses it there
    (genai has a prompt lookup of its own, which the bench's genai-int8-pl row runs; the
    server's genai path does not turn it on)."""
    spec = speculation_from_args(args)
    reuse = bool(args.reuse_prefix) if "reuse_prefix" in args else False
    out: dict[str, LoaderOption] = {}
    if get_spec(args.backend).source == "batched" and reuse:
        out["prefix_caching"] = True
        reuse = False
    if spec is not None:
        out["speculate"] = spec
    if reuse:
        out["reuse_prefix"] = True
    return out
