"""The `chatlab` command. Each module of this package registers its own subcommands, so this
file stays a table of contents: models, render, bench, serve, lab."""
from __future__ import annotations

import argparse
import sys

from chatlab.cli import bench, lab, models, render, serve
from chatlab.errors import ChatlabError
from chatlab.lab.session import python_problem

# each has `register(subparsers)`; handlers import heavy libraries lazily, so --help stays fast
COMMAND_MODULES = [models, render, bench, serve, lab]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatlab", description=__doc__)
    parser.set_defaults(func=None)  # each subcommand sets its handler
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a run's JSON records the command
    if args.func is None:
        parser.print_help()
        return 2
    # An unsupported Python fails later in confusing ways; doctor still runs, to report it.
    if args.command != "doctor" and (problem := python_problem()) is not None:
        print(f"chatlab {args.command}: error: {problem}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except ChatlabError as err:
        print(f"chatlab {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"chatlab {args.command}: interrupted", file=sys.stderr)
        return 130

