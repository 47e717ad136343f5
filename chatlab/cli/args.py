"""The flags several commands share, and the values they parse into. A backend option is
declared once, in chatlab.backends.registry; `add_backend_args` draws one flag per option."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from chatlab._thirdparty import Jsonable, LoaderOption
from chatlab.backends.registry import DEFAULT_BACKEND, REGISTRY, every_option, get_spec, options_for
from chatlab.errors import ChatlabError
from chatlab.generate.speculate import DRAFT_TOKENS_RANGE, METHODS, NGRAM_RANGE, Speculation


def read_json(path: str | Path, what: str) -> Jsonable:
    """A JSON file a flag names; a missing, unreadable or malformed one is a ChatlabError naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        why = "it does not exist" if isinstance(err, FileNotFoundError) else err.strerror
        raise ChatlabError(f"cannot read the {what} file {path}: {why}; pass a path to a JSON file") from None
    except ValueError as err:
        raise ChatlabError(f"the {what} file {path} is not valid JSON ({err}); fix it") from None


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--model, --template, and the registry's --backend, --weight-format, --precision and options."""
    p.add_argument("--model", help="a store name, model folder or hub id "
                   "(default: $CHATLAB_MODEL, else smollm2-135m-instruct)")
    p.add_argument("--template", help="a template name or file (default: the resolution chain)")
    add_backend_args(p)


def flag_type(convert: Callable[[str], LoaderOption]) -> Callable[[str], LoaderOption]:
    """`convert` as an argparse type: a ValueError it raises becomes the usage error, its message
    kept (argparse would print only "invalid <name> value"); int, float and str stay as they are."""
    if convert in (int, float, str):
        return convert

    def parse(text: str) -> LoaderOption:
        try:
            return convert(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """--backend, --weight-format, --precision and every backend's options (each flag once)."""
    # names are checked by check_choice, not argparse choices: one message from the CLI and Python
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help="; ".join(f"{s.name}: {s.summary}" for s in REGISTRY.values())
                   + f" (default {DEFAULT_BACKEND})")
    p.add_argument("--weight-format", default=None,
                   help="default per backend: " + ", ".join(f"{s.default_weight_format} on {s.name}"
                                                            for s in REGISTRY.values()))
    p.add_argument("--precision", default=None,
                   help="arithmetic: f32 (default; exact) or bf16 (faster on CPUs with bf16, drifts; "
                        "--fast picks bf16 where the CPU has it)")
    for opt in every_option():
        if opt.type is bool:  # a switch: present or not
            p.add_argument(opt.flag, dest=opt.name, action="store_const", const=True, default=None,
                           help=opt.help)
            continue
        # default None: an option left out is the loader's own default (and is not passed)
        p.add_argument(opt.flag, dest=opt.name, type=flag_type(opt.type), default=None,
                       help=opt.help + ("" if opt.default is None else f" (default {opt.default})"))


def options_from_args(args: argparse.Namespace) -> dict[str, LoaderOption]:
    """The loader options given on the command line, checked against the chosen backend."""
    given = {o.name: getattr(args, o.name) for o in every_option() if getattr(args, o.name, None) is not None}
    return options_for(args.backend, given)


def add_speedup_args(p: argparse.ArgumentParser, reuse: bool = True) -> None:
    """--speculate, --draft-tokens, --ngram and (with `reuse`) --reuse-prefix."""
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
    method = getattr(args, "speculate", None)
    return None if method is None else Speculation(method, draft_tokens=args.draft_tokens,
                                                   ngram=args.ngram)


def speedups_from_args(args: argparse.Namespace) -> dict[str, LoaderOption]:
    """The engine's load keywords for --speculate and --reuse-prefix on the chosen --backend (on
    a batched one, reuse is its own prefix caching and load_engine refuses speculation)."""
    out: dict[str, LoaderOption] = {}
    if (spec := speculation_from_args(args)) is not None:
        out["speculate"] = spec
    if getattr(args, "reuse_prefix", False):
        batched = get_spec(getattr(args, "backend", DEFAULT_BACKEND)).source == "batched"
        out["prefix_caching" if batched else "reuse_prefix"] = True
    return out
