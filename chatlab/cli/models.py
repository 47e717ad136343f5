"""`chatlab models` (the assets, where they live, whether their builds are intact) and `chatlab export`."""
from __future__ import annotations

import argparse
import json
from typing import cast

from chatlab.backends.export import export_dir, export_model, is_exported
from chatlab.models.store import all_assets, asset_path, describe, verify_cache


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model store's assets")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--build", metavar="NAME", action="append", default=[],
                   help="convert an asset into the cache now, or rebuild a damaged one (repeatable)")
    p.add_argument("--verify", action="store_true",
                   help="hash every file of every built asset against its build record; "
                        "exit 1 when one is damaged")
    p.set_defaults(func=run)

    p = sub.add_parser("export", help="export a model to OpenVINO (fp32, int8 or int4), cached")
    p.add_argument("--model", default="smollm2-135m-instruct",
                   help="a chat model of the store, a local Hugging Face folder, or a hub id "
                        "(its snapshot in the Hugging Face cache)")
    p.add_argument("--weight-format", default="int8", help="fp32, int8 or int4 (default int8)")
    p.add_argument("--stateless", action="store_true",
                   help="the graph without state, its KV cache as inputs and outputs (what "
                        "chatlab.lab.explicit_kv and notebook 03 drive)")
    p.add_argument("--force", action="store_true", help="export again even when cached")
    p.set_defaults(func=run_export_model)


def _size(n: object) -> str:
    return f"{n / 1e6:,.0f} MB" if isinstance(n, int) and n else "-"


def run_verify() -> int:
    results = verify_cache()
    for name, problems in results.items():
        if not problems:
            print(f"{name}: ok (every file matches its sha256 from the build)")
            continue
        print(f"{name}: damaged")
        for problem in problems:
            print(f"    {problem}")
        print(f"    fix: chatlab models --build {name}")
    if not results:
        print("nothing is built yet; `chatlab models --build NAME` builds one")
    return 1 if any(results.values()) else 0


def run(args: argparse.Namespace) -> int:
    for name in args.build:
        print(f"{name}: {asset_path(name)}")
    if args.verify:
        return run_verify()
    rows = [describe(a) for a in all_assets()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = "available" if r["available"] else "missing"
        if r["state"] == "not built":
            state += " (not built yet: chatlab models --build " + str(r["name"]) + ")"
        elif r["state"] in ("damaged", "unchecked"):
            state += f" ({r['state']}: " + "; ".join(cast("list[str]", r["problems"]))
            state += f"; fix: chatlab models --build {r['name']})"
        print(f"{r['name']:<28} {state}")
        print(f"    {r['kind']}, {_size(r['size'])}, licence: {r['licence']}")
        print(f"    offline: {r['source']}; online: {r['hub_id']}")
        if r["path"]:
            print(f"    path: {r['path']}")
    return 0


def run_export_model(args: argparse.Namespace) -> int:
    stateful = not args.stateless
    cached = is_exported(export_dir(args.model, args.weight_format, stateful)) and not args.force
    folder = export_model(args.model, args.weight_format, force=args.force, stateful=stateful)
    kind = "" if stateful else " stateless"
    print(f"{'reused' if cached else 'exported'} {args.model} {args.weight_format}{kind}: {folder}")
    return 0
