"""The course's commands: `chatlab doctor`, `chatlab rehearse` and `chatlab class-notebook`."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from chatlab.lab import classbook, rehearse, route
from chatlab.lab.doctor import collect, print_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check this machine: versions, CPU, memory, models, fixes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_doctor)
    p = sub.add_parser("rehearse", help="run the 2-hour class route, each notebook in a fresh kernel "
                       "from an empty model cache; a table of setup and route seconds and peak memory")
    p.add_argument("notebooks", nargs="*", help="notebook numbers (default: every notebook on the route)")
    p.add_argument("--all", action="store_true", help="every cell of every notebook, not only the route")
    p.add_argument("--class", dest="klass", action="store_true",
                   help="run the class notebook (notebooks/class.ipynb) in one kernel instead of each notebook")
    p.add_argument("--dry-run", action="store_true", help="validate the route and list the cells; run nothing")
    p.add_argument("--cgroup", action="store_true",
                   help="run each kernel in a 2 GB memory cgroup, as Binder does (root, cgroup v1)")
    p.add_argument("--colab", action="store_true",
                   help="run each notebook on a cold runtime of the Colab replica (Python 3.13, Colab's "
                        "packages): the first cell's install and restart included in its setup")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the table as JSON to FILE, with the machine and the date")
    p.set_defaults(func=run_rehearse)
    c = sub.add_parser("class-notebook", help="write the route's minutes into the notebooks' time lines, 01's "
                       "and the README's tables, then notebooks/class.ipynb: every route section of the nine "
                       "notebooks in order, with their stored outputs, after one set-up")
    c.add_argument("--check", action="store_true", help="write nothing; exit 1 where the stored one is out of sync")
    c.set_defaults(func=write_class)


def run_rehearse(args: argparse.Namespace) -> int:
    runner = rehearse.ColabRunner() if args.colab else None
    return rehearse.rehearse(args.notebooks, args.all, args.dry_run, args.cgroup, runner=runner, report=args.json,
                             klass=args.klass)


def write_class(args: argparse.Namespace) -> int:
    if args.check:
        try:
            classbook.check_class_notebook()
        except route.RouteError as err:
            print(f"chatlab class-notebook: {err}")
            return 1
        print(f"{route.CLASS_NOTEBOOK.name} is in sync with the route and the nine notebooks")
        return 0
    for path in classbook.write_route_text():
        print(f"updated the route's minutes in {path}")
    print(f"wrote {classbook.write_class_notebook()}")
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["problems"] else 0
