"""`chatlab diff-templates`: render one chat with two templates; exit 0 when the ids are equal,
1 when they differ (the report says where and whose), 2 on bad input. `chatlab certify`: one
template through every engine (exit codes in render/io/certify.py and the command's help)."""
from __future__ import annotations

import argparse

from chatlab.cli.render import _read_json, load_cli_template
from chatlab.models import load_tokenizer
from chatlab.render.io import diff_templates
from chatlab.render.io.certify import certify
from chatlab.render.io.formats import TEMPLATE_FORMATS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff-templates", help="render a chat with templates A and B and show the first "
                       "token where their ids differ (exit 0 equal, 1 different)")
    p.add_argument("--model", required=True, help="the tokenizer: a store name (chatlab models), a folder or a hub id")
    p.add_argument("--messages", required=True, metavar="FILE.json", help="a JSON list of messages")
    p.add_argument("--tools", metavar="FILE.json", help="a JSON list of tools (OpenAI shape)")
    p.add_argument("a", help="a built-in template name or a template file")
    p.add_argument("b", help="a built-in template name or a template file")
    p.add_argument("--template-format-a", choices=tuple(TEMPLATE_FORMATS), help="the format of file A (default: detected)")
    p.add_argument("--template-format-b", choices=tuple(TEMPLATE_FORMATS), help="the format of file B (default: detected)")
    p.set_defaults(func=run_diff)

    p = sub.add_parser("certify", help="render a fixed conversation set with a template through every engine's "
                       "semantics (Jinja/vLLM, LMDeploy, Ollama); each cell is id-equal, differs, cannot "
                       "express or not rendered. Exit 0: something rendered and every cell is id-equal; "
                       "1: a cell differs; 3: none differs, but some cannot be expressed in an engine's "
                       "format, or nothing rendered; 2: bad input",
                       description="Exit codes: 0 at least one cell rendered and every rendered cell is "
                       "id-equal; 1 some cell differs (the first differing token, both sides, its cause); "
                       "3 nothing differs, but some cell cannot be expressed in an engine's format (the "
                       "construct is named) or no conversation rendered; 2 bad input (a file in no known "
                       "format, a tokenizer without the template's special tokens).")
    p.add_argument("--model", required=True, help="the tokenizer: a store name (chatlab models), a folder or a hub id")
    p.add_argument("template", help="a built-in template name or a template file")
    p.add_argument("--template-format", choices=tuple(TEMPLATE_FORMATS), help="the format of the file (default: detected)")
    p.add_argument("--json", action="store_true", help="the certificate as JSON (for CI): the same verdicts, "
                   "exit_code, and each cell's first difference")
    p.set_defaults(func=run_certify)


def run_diff(args: argparse.Namespace) -> int:
    a = load_cli_template(args.a, args.template_format_a)
    b = load_cli_template(args.b, args.template_format_b)
    assert a is not None and b is not None  # A and B are required arguments
    messages = _read_json(args.messages, "messages")
    tools = _read_json(args.tools, "tools") if args.tools else None
    d = diff_templates(load_tokenizer(args.model), messages, a, b, tools=tools)
    print(d)
    return 0 if d.equal else 1


def run_certify(args: argparse.Namespace) -> int:
    import json

    template = load_cli_template(args.template, args.template_format)
    assert template is not None  # TEMPLATE is a required argument
    cert = certify(load_tokenizer(args.model), template)
    print(json.dumps(cert.to_json(), indent=2, ensure_ascii=False) if args.json else cert.format())
    return cert.exit_code

