"""`chatlab rehearse` (`./run.sh rehearse`): the 2-hour class run as a class runs it
(chatlab.lab.rehearse)."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearse", help="run the 2-hour class route, each notebook in a fresh kernel "
                       "from an empty model cache; a table of setup and route seconds and peak memory")
    p.add_argument("notebooks", nargs="*", help="notebook numbers (default: every notebook on the route)")
    p.add_argument("--all", action="store_true", help="every cell of every notebook, not only the route")
    p.add_argument("--dry-run", action="store_true", help="validate the route and list the cells; run nothing")
    p.add_argument("--cgroup", action="store_true",
                   help="run each kernel in a 2 GB memory cgroup, as Binder does (root, cgroup v1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from chatlab.lab.rehearse import rehearse

    return rehearse(args.notebooks, args.all, args.dry_run, args.cgroup)
