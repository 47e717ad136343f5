"""`chatlab diff-templates`: render one chat with two templates; exit 0 when the ids are equal,
1 when they differ (the report says where and whose), 2 on bad input."""
from __future__ import annotations

import argparse

from chatlab.render.cli import FORMATS, _read_json, load_cli_template


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff-templates", help="render a chat with templates A and B and show the first "
                       "token where their ids differ (exit 0 equal, 1 different)")
    p.add_argument("--model", required=True, help="the tokenizer: a store name (chatlab models), a folder or a hub id")
    p.add_argument("--messages", required=True, metavar="FILE.json", help="a JSON list of messages")
    p.add_argument("--tools", metavar="FILE.json", help="a JSON list of tools (OpenAI shape)")
    p.add_argument("a", help="a built-in template name or a template file")
    p.add_argument("b", help="a built-in template name or a template file")
    p.add_argument("--template-format-a", choices=FORMATS, help="the format of file A (default: detected)")
    p.add_argument("--template-format-b", choices=FORMATS, help="the format of file B (default: detected)")
    p.set_defaults(func=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    a = load_cli_template(args.a, args.template_format_a)
    b = load_cli_template(args.b, args.template_format_b)
    messages = _read_json(args.messages, "messages")
    tools = _read_json(args.tools, "tools") if args.tools else None
    from chatlab.models import load_tokenizer
    from chatlab.render.io import diff_templates

    d = diff_templates(load_tokenizer(args.model), messages, a, b, tools=tools)
    print(d)
    return 0 if d.equal else 1
