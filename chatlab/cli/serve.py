"""`chatlab complete` (one completion through the server's path) and `chatlab serve`, on the flags' engine."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chatlab._thirdparty import Jsonable, LoaderOption
from chatlab.backends.precision import compute_line
from chatlab.cli.args import (add_model_args, add_speedup_args, options_from_args, read_json,
                             speedups_from_args)
from chatlab.engine import engine as chat_engine
from chatlab.engine.engine import ChatEngine
from chatlab.engine.plan import ChatPlan
from chatlab.engine.request import parse_request
from chatlab.errors import ChatlabError
from chatlab.models import default_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("complete", help="render, generate and parse one chat completion")
    add_model_args(p)
    add_speedup_args(p, reuse=False)
    p.add_argument("--messages", required=True, type=Path, help="a JSON file: a list of messages")
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--temperature", type=float, help="0 = greedy (default 1.0, as OpenAI)")
    p.add_argument("--top-p", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--stop", action="append", default=None, help="a stop string (repeatable)")
    p.add_argument("--tools", type=Path, help="a JSON file: a list of OpenAI tools")
    p.add_argument("--tool-choice", help="auto, none, required, or a tool name")
    p.add_argument("--response-format", type=Path, help="a JSON file: an OpenAI response_format")
    p.add_argument("--stream", action="store_true", help="print text (or chunks) as they come")
    p.add_argument("--json", action="store_true", help="print OpenAI JSON objects")
    p.set_defaults(func=run_complete)
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
    p.set_defaults(func=run_serve)


def build_request(args: argparse.Namespace) -> dict[str, Jsonable]:
    messages = read_json(args.messages, "messages")
    if isinstance(messages, dict) and "messages" in messages:
        messages = messages["messages"]  # a whole request body is fine too
    body: dict[str, Jsonable] = {"model": args.model, "messages": messages, "stream": args.stream,
                            "stream_options": {"include_usage": True} if args.stream else None}
    for key in ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "tool_choice"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if args.tools:
        body["tools"] = read_json(args.tools, "tools")
        if not isinstance(body["tools"], list):  # else pydantic's bare "Input should be a valid list"
            raise ChatlabError(f"the tools file {args.tools} must hold a JSON list of tools; write "
                               '[{"type": "function", "function": {"name": ..., "parameters": {...}}}]')
    if args.response_format:
        body["response_format"] = read_json(args.response_format, "response format")
    return body


def engine_options(args: argparse.Namespace) -> dict[str, LoaderOption]:
    """load_engine's keywords for the model and speedup flags, all checked before anything loads."""
    options = options_from_args(args)
    if options.get("max_seqs", 1) < 1:
        raise ChatlabError(f"--max-seqs {options['max_seqs']}: use 1 or more")
    return {"model": args.model, "backend": args.backend, "weight_format": args.weight_format,
            "template": args.template, "precision": args.precision, **options, **speedups_from_args(args)}


def load_cli_engine(args: argparse.Namespace) -> ChatEngine:
    """The engine the flags ask for; with --fast, what the fast profile turned on, on stderr."""
    engine = chat_engine.load_engine(**engine_options(args))
    if args.fast:
        print(f"chatlab: fast mode: {compute_line(engine.backend)}", file=sys.stderr, flush=True)
    return engine


def run_complete(args: argparse.Namespace) -> int:
    args.model = args.model or default_model()  # one variable picks the model everywhere
    # parsed once, messages and tools included: a bad request fails before the model loads
    req = parse_request(build_request(args))
    engine = load_cli_engine(args)
    plan = engine.check(req)
    assert isinstance(plan, ChatPlan)  # a chat request's plan
    if not args.stream:
        answer = engine.chat(plan)
        if args.json:
            print(json.dumps(answer, ensure_ascii=False, indent=2))
        else:
            msg = answer["choices"][0]["message"]
            print(msg.get("content") or "")
            for call in msg.get("tool_calls") or []:
                print(f"tool call: {call['function']['name']}({call['function']['arguments']})")
        return 0
    for chunk in engine.chat_stream(plan):
        if args.json:
            print(json.dumps(chunk, ensure_ascii=False), flush=True)
            continue
        for choice in chunk["choices"]:
            delta = choice["delta"]
            parts = [delta.get("content") or ""]
            for piece in delta.get("tool_calls") or []:  # the name once, then argument pieces
                fn = piece["function"]
                parts.append(f"[call {fn['name']}] " if fn.get("name") else fn.get("arguments", ""))
            sys.stdout.write("".join(parts))
            sys.stdout.flush()
    if not args.json:
        print()
    return 0


def run_serve(args: argparse.Namespace) -> int:
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
