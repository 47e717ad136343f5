"""`chatlab export`: a model exported to OpenVINO (fp32, int8 or int4) into the cache."""
from __future__ import annotations

import argparse

from chatlab.backends.export import export_dir, export_model, is_exported


def register(sub: argparse._SubParsersAction) -> None:
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


def run_export_model(args: argparse.Namespace) -> int:
    stateful = not args.stateless
    cached = is_exported(export_dir(args.model, args.weight_format, stateful)) and not args.force
    folder = export_model(args.model, args.weight_format, force=args.force, stateful=stateful)
    kind = "" if stateful else " stateless"
    print(f"{'reused' if cached else 'exported'} {args.model} {args.weight_format}{kind}: {folder}")
    return 0
