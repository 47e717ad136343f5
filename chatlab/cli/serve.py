"""`chatlab serve`: the OpenAI-compatible server in the foreground."""
from __future__ import annotations

import argparse

from chatlab.cli.args import add_model_args, add_speedup_args
from chatlab.cli.complete import load_cli_engine
from chatlab.models import default_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    add_model_args(p)
    add_speedup_args(p)
    p.add_argument("--host", default="127.0.0.1", help="loopback by default")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    p.add_argument("--max-waiting", type=int, default=32, help="queued requests before 429")
    p.add_argument("--max-body-bytes", type=int, default=2_000_000)
    p.add_argument("--max-messages", type=int, default=256, help="messages per request before 400")
    p.add_argument("--strict-model-name", action="store_true",
                   help="answer 404 to a request naming another model (vLLM's behaviour); by "
                        "default any requested model is answered by the one served (RTP-LLM's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from chatlab.serve.app import create_app  # fastapi and uvicorn at its top: kept off the other commands

    args.model = args.model or default_model()  # one variable picks the model everywhere
    engine = load_cli_engine(args)
    app = create_app(engine, api_key=args.api_key, max_waiting=args.max_waiting,
                     max_messages=args.max_messages, max_body_bytes=args.max_body_bytes,
                     strict_model_name=args.strict_model_name)
    print(f"chatlab: serving {args.model} at http://{args.host}:{args.port}/v1 "
          f"(template {engine.resolution.name}: {engine.resolution.reason})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
