"""`chatlab models`: what assets exist, which are available here, and where they live."""
from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model store's assets")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--build", metavar="NAME", action="append", default=[],
                   help="convert an asset into the cache now (repeatable)")
    p.set_defaults(func=run)


def _size(n: object) -> str:
    return f"{n / 1e6:,.0f} MB" if isinstance(n, int) and n else "-"


def run(args: argparse.Namespace) -> int:
    from chatlab.models.store import all_assets, asset_path, describe

    for name in args.build:
        print(f"{name}: {asset_path(name)}")
    rows = [describe(a) for a in all_assets()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = "available" if r["available"] else "missing"
        if r["available"] and not r["path"]:
            state += " (not built yet: chatlab models --build " + str(r["name"]) + ")"
        print(f"{r['name']:<28} {state}")
        print(f"    {r['kind']}, {_size(r['size'])}, licence: {r['licence']}")
        print(f"    offline: {r['source']}; online: {r['hub_id']}")
        if r["path"]:
            print(f"    path: {r['path']}")
    return 0
