"""The template commands: `render`, `templates`, `audit`, `export-template`, `diff-templates`, `certify`."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from chatlab.cli.args import read_json
from chatlab.errors import ChatlabError
from chatlab.models import generation_config_of, load_gguf_tokenizer, load_tokenizer
from chatlab.render import resolve
from chatlab.lab.audit import audit
from chatlab.render.compose import Resolution
from chatlab.render.io import diff_templates, export_template, load_template
from chatlab.lab.certify import CANNOT, DIFFERS, EQUAL, NOT_RENDERED, certify, certify_export, explain
from chatlab.lab.certify import name as engine_name
from chatlab.render.io.formats import EXPORT_TARGETS, TEMPLATE_FORMATS
from chatlab.render.template import TEMPLATES, get_template
from chatlab.types import parse_messages, parse_tools


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="render a chat to token ids (id-level, injection-safe)")
    p.add_argument("--model", required=True, help="a store name (chatlab models), a folder or a hub id")
    p.add_argument("--template", help="a built-in template name (chatlab templates) or a template file "
                   "(.jinja, LMDeploy/LLaMA-Factory .json, Modelfile); default: resolved")
    p.add_argument("--template-format", choices=tuple(TEMPLATE_FORMATS), help="the format of the --template file "
                   "(default: from its name, then its content)")
    p.add_argument("--messages", required=True, metavar="FILE.json", help="a JSON list of messages")
    p.add_argument("--tools", metavar="FILE.json", help="a JSON list of tools (OpenAI shape)")
    p.add_argument("--format", choices=["text", "ids", "json"], default="text")
    p.add_argument("--no-generation-prompt", action="store_true", help="do not open an assistant turn")
    p.set_defaults(func=run_render)

    p = sub.add_parser("templates", help="list the built-in chat templates, one per line")
    p.set_defaults(func=run_templates)

    p = sub.add_parser("audit", help="check a tokenizer + template for split specials, BOS and eos bugs")
    p.add_argument("--model", required=True)
    p.add_argument("--template", help="audit this built-in template instead of the resolved one")
    p.add_argument("--gguf", action="store_true",
                   help="load the tokenizer as transformers does from the model's GGUF file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_audit)

    p = sub.add_parser("export-template", help="print a template as a Jinja chat_template, an LMDeploy "
                       "JSON config or an Ollama Modelfile (exit 3: the format cannot express it)",
                       description="Exit codes: 0 the export is printed; 1 with --model, the engine would "
                       "render other ids than the template (nothing printed, unless --force); 3 the format "
                       "cannot express the template (the construct is named, nothing printed), as "
                       "`chatlab certify` says 'cannot express' with 3; 2 bad input (an unknown name, a "
                       "file in no known format).")
    p.add_argument("name", help="a built-in template name or a template file (LMDeploy/LLaMA-Factory JSON)")
    p.add_argument("--format", choices=EXPORT_TARGETS, default="jinja", help="the output format (default jinja)")
    p.add_argument("--template-format", choices=tuple(TEMPLATE_FORMATS), help="the format of NAME when it is a file")
    p.add_argument("--drop-tools", action="store_true",
                   help="export a tool-capable template's chat layout to a format without tool support")
    p.add_argument("--model", help="check the export with this tokenizer (a store name, a folder or a hub id): "
                   "refuse it (exit 1) when the engine would render other ids than the template; "
                   "without it the export is unchecked")
    p.add_argument("--force", action="store_true", help="with --model: write an export that differs, with a warning")
    p.set_defaults(func=run_export_template)

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


def load_cli_template(name: str | None, fmt: str | None) -> str | Resolution | None:
    """A built-in name as it is; a file loaded now (a bad file fails before any model loads)."""
    if name is None:
        if fmt:
            raise ChatlabError("--template-format needs --template FILE")
        return None
    if name in TEMPLATES and fmt is None:
        return name
    if not Path(name).is_file():
        if fmt:
            raise ChatlabError(f"--template-format needs a file, and {name!r} is not one; pass the path")
        get_template(name)  # an unknown name: the list of valid ones
    with warnings.catch_warnings(record=True) as caught:  # a reader's warning, said as one line
        warnings.simplefilter("always")
        loaded = load_template(name, fmt)
    for w in caught:
        print(f"chatlab: warning: {w.message}", file=sys.stderr)
    return loaded


def run_render(args: argparse.Namespace) -> int:
    template = load_cli_template(args.template, args.template_format)
    messages = read_json(args.messages, "messages")
    tools = read_json(args.tools, "tools") if args.tools else None
    tokenizer = load_tokenizer(args.model)
    # the server's render step (Resolution.render_request), so both give the same ids
    res, r = resolve(tokenizer, args.model, template).render_request(
        parse_messages(messages), parse_tools(tools), add_generation_prompt=not args.no_generation_prompt)
    if args.format == "ids":
        print(" ".join(map(str, r.ids)))
    elif args.format == "json":
        data = r.to_json()
        data["tool_format"] = res.tool_format.name if res.tool_format else None
        data["tokenizer"] = getattr(tokenizer, "chatlab_source", None) or getattr(tokenizer, "name_or_path", "")
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(r.text)
        print(f"--- {len(r.ids)} tokens; {res.explain()}")
        print(f"--- stop words {r.stop_words}, stop ids {r.stop_ids}")
        if tools and res.tool_format is None:
            print("--- tools written by the template's own tool section, in a call format chatlab does not "
                  "parse: the server refuses tool_choice auto, required and named for this template (400)")
    return 0


def run_templates(args: argparse.Namespace) -> int:
    for name, t in TEMPLATES.items():
        tools = f" [tools: {t.tool_format.name}]" if t.tool_format else ""
        print(f"{name}\t{t.description}{tools}")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    if args.template:
        get_template(args.template)  # an unknown name fails before any model loads
    tokenizer = load_gguf_tokenizer(args.model) if args.gguf else load_tokenizer(args.model)
    report = audit(tokenizer, args.model, args.template, generation_config_of(args.model))
    report.model = args.model + (" (GGUF-loaded by transformers)" if args.gguf else "")
    print(json.dumps(report.to_json(), indent=2, ensure_ascii=False) if args.json else report.format())
    return 0 if report.ok else 1


def run_export_template(args: argparse.Namespace) -> int:
    loaded = load_cli_template(args.name, args.template_format)
    assert loaded is not None  # NAME is a required argument
    text = export_template(loaded, args.format, drop_tools=args.drop_tools)
    if not check_export(args, loaded, text):
        return 1
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def check_export(args: argparse.Namespace, template: "str | Resolution", text: str) -> bool:
    """`export-template --model`: certify `text` for its engine with that tokenizer; False when a
    probe differs, unless --force. Every outcome goes to stderr, so stdout stays the file."""
    say = f"chatlab {args.command}:"
    if args.model is None:
        if args.force:
            print(f"{say} warning: --force does nothing without --model", file=sys.stderr)
        print(f"{say} note: the export is unchecked; pass --model M to check that {args.format} renders "
              "the template's ids with M's tokenizer", file=sys.stderr)
        return True
    cert = certify_export(load_tokenizer(args.model), template, args.format, text, args.drop_tools)
    row = cert.cells[args.format]
    counts = {v: sum(c.verdict == v for c in row.values()) for v in (EQUAL, DIFFERS, CANNOT, NOT_RENDERED)}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    engine = engine_name(args.format)
    if (found := cert.first_difference()) is None:
        if counts[EQUAL]:
            print(f"{say} checked with {args.model}: {summary} of {len(row)} probe conversations", file=sys.stderr)
        else:
            print(f"{say} note: the export is unchecked: none of the {len(row)} probe conversations rendered "
                  f"({summary})", file=sys.stderr)
        return True
    _, conv, cell = found
    assert cell.first is not None  # a cell that differs holds its differences
    what = (f"{engine} renders other ids than the template with {args.model} in {counts[DIFFERS]} of {len(row)} "
            f"probe conversations; first: {conv!r} at {explain(cell.first, engine)}")
    if args.force:
        print(f"{say} warning: {what}; written anyway (--force)", file=sys.stderr)
        return True
    print(f"{say} error: {what}. Use the model's own tokenizer, export another format, or pass --force "
          "to write it anyway", file=sys.stderr)
    return False


def run_diff(args: argparse.Namespace) -> int:
    a = load_cli_template(args.a, args.template_format_a)
    b = load_cli_template(args.b, args.template_format_b)
    assert a is not None and b is not None  # A and B are required arguments
    messages = read_json(args.messages, "messages")
    tools = read_json(args.tools, "tools") if args.tools else None
    d = diff_templates(load_tokenizer(args.model), messages, a, b, tools=tools)
    print(d)
    return 0 if d.equal else 1


def run_certify(args: argparse.Namespace) -> int:
    template = load_cli_template(args.template, args.template_format)
    assert template is not None  # TEMPLATE is a required argument
    cert = certify(load_tokenizer(args.model), template)
    print(json.dumps(cert.to_json(), indent=2, ensure_ascii=False) if args.json else cert.format())
    return cert.exit_code
