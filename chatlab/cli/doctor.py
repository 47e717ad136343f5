"""`chatlab doctor`: the machine's report (chatlab.lab.doctor) as text or JSON; exit 1 on a problem."""
from __future__ import annotations

import argparse
import json

from chatlab.lab.doctor import collect, print_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check this machine: versions, CPU, memory, models, fixes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["problems"] else 0
