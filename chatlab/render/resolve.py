"""Which renderer a model gets, and why (the resolution chain of the RTP-LLM article), and the
Resolution it yields: the rule that chose it, the reason, and its id-level render.

1. "explicit": a template named by the user (a built-in, or a file chatlab.render.io reads);
2. "model-renderer": a model whose official prompt is built in code, not by its chat_template
   (ChatGLM3's build_chat_input, whose chat_template splits role tokens; Qwen-1's make_context,
   which has no chat_template; ChatGLM2 and Baichuan2, built in code);
3. "tokenizer-template": the tokenizer's own chat_template, through the safe Jinja path;
4. "model-type": a built-in template chosen from the model's type or name;
5. "chatml-fallback": ChatML.

A request with tools is rendered by the template the chain chose, through its own tool section
(a Jinja template's, in whatever format it writes) or its tool format; a template that has
neither refuses the request, naming itself and what it lacks. The one other template a request
can get is the built-in the model store names for that model ("tools-fallback", `for_tools`),
never one guessed from a model's name.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePath
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, Union

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.errors import ChatlabError
from chatlab.models.assets import ASSETS
from chatlab.render.builtin import TEMPLATES, get_template
from chatlab.render.compose import Composer
from chatlab.render.encoder import Encoder, encoder_for
from chatlab.render.ids import Piece, Rendered, encode_pieces
from chatlab.render.jinja_safe import jinja_pieces, template_reads
from chatlab.render.template import Template
from chatlab.tools import TOOL_FORMATS, ToolFormat, as_tools, format_of_chat_template
from chatlab.types import Message, ToolSpec, parse_messages

if TYPE_CHECKING:
    from pathlib import Path

    from chatlab.render.io.loaded import LoadedTemplate

# What render() takes: typed messages, or OpenAI-shaped dicts (a notebook's), parsed once.
ChatMessages = Sequence[Message] | Sequence[Mapping[str, Jsonable]]

# What `template=` takes: a built-in name or a file's path, a loaded file, or a Resolution
TemplateChoice = Union[str, "Path", "LoadedTemplate", "Resolution", None]

# Tokens that end a turn in common chat_templates (the tool formats add their own).
END_MARKERS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|endoftext|>", "<|user|>",
               "<end_of_turn>", *(t for f in TOOL_FORMATS.values() for t in f.end_tokens)]


def identity_of(tokenizer: HFTokenizer, model_name: str | None) -> str:
    return " ".join(filter(None, [model_name or "", str(getattr(tokenizer, "name_or_path", "") or ""),
                                  type(tokenizer).__name__]))


def as_messages(messages: Jsonable) -> list[Message]:
    """Messages as they are; anything else (OpenAI dicts, from a notebook) parsed once."""
    if isinstance(messages, (list, tuple)) and messages and all(isinstance(m, Message) for m in messages):
        return list(messages)
    return parse_messages(messages)


def vllm_message(m: Message) -> dict[str, Jsonable]:
    """A message as vLLM hands it to a Jinja chat_template: tool-call arguments as an object
    (vLLM's chat_utils parses the JSON text), so `arguments | tojson` writes `{"city": ...}` and
    `arguments.items()` works (Qwen2.5, Hermes, Llama-3.1), not a JSON string inside a string.
    Arguments that are not a JSON object stay the text they are."""
    d = m.to_template()
    for call in d.get("tool_calls", ()):
        try:
            args = json.loads(call["function"]["arguments"])
        except ValueError:
            continue
        if isinstance(args, dict):
            call["function"]["arguments"] = args
    return d


@dataclass
class Resolution:
    rule: str
    reason: str
    name: str
    tokenizer: HFTokenizer = field(repr=False)
    template: Template | None = field(default=None, repr=False)
    chat_template: str | None = field(default=None, repr=False)
    tool_format: ToolFormat | None = None
    # An imported format with its own evaluator (Ollama's Go templates): (encoder, messages, tools,
    # add_generation_prompt, options) -> pieces; its stop strings become ids or stop words.
    renderer: Callable[..., list] | None = field(default=None, repr=False)
    stop_strings: tuple[str, ...] = ()
    # The engine whose own tokenizer call adds the bos id in front of the rendered text (a
    # template in its format never writes it): "ollama" (llama.cpp adds it even when the text
    # already starts with one) or "lmdeploy" (its encode drops a doubled one). None: the
    # template writes everything itself (Jinja, built-ins, LLaMA-Factory slots).
    engine_bos: str | None = None
    # The built-in the model store names for this model's requests with tools, where its own
    # chat_template has no tool section (Asset.tool_template); None: no other template, ever.
    tools_template: str | None = None

    @property
    def label(self) -> str:
        """The template as an error names it."""
        if self.rule == "tokenizer-template":  # a folder by its name only: no machine path in errors
            who = str(getattr(self.tokenizer, "name_or_path", "") or type(self.tokenizer).__name__)
            if PurePath(who).is_absolute():
                who = PurePath(who).name
            return f"the chat_template of the tokenizer {who!r}"
        return f"template {self.name!r}"

    @property
    def writes_tools(self) -> bool:
        """Whether this template writes tool definitions: a tool format, an Ollama template (which
        renders .Tools or refuses them itself), or a Jinja template with a tool section."""
        if self.tool_format is not None or self.renderer is not None:
            return True
        return self.chat_template is not None and "tools" in template_reads(self.chat_template)

    @property
    def encoder(self) -> Encoder:
        return encoder_for(self.tokenizer)

    def stops(self, tools: bool) -> tuple[list[str], list[int]]:
        enc = self.encoder
        if self.template is not None:
            fmt = self.template.tool_format
            words = list(self.template.stop_words) + (list(fmt.stop_words) if tools and fmt else [])
            names = list(self.template.stop_tokens)
        else:
            words, names = [], ["eos"] + [m for m in END_MARKERS if m in (self.chat_template or "")]
        if self.renderer is not None:
            names = ["eos", *(w for w in self.stop_strings if w in enc.added or w in enc.extra_specials)]
            words = [w for w in self.stop_strings if w not in names]
        ids: list[int] = []
        for name in names:
            tid = enc.eos_id if name == "eos" else enc.added.get(name, enc.extra_specials.get(name))
            if tid is not None and tid not in ids:
                ids.append(tid)
        return words, ids

    def render(self, messages: ChatMessages, tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] | None = None,
               add_generation_prompt: bool = True, **options: Jsonable) -> Rendered:
        """Ids for `messages` (and `tools`). Typed values are used as they are; plain OpenAI
        dicts (a notebook's) are parsed once by chatlab.types, the only validator."""
        if "functions" in options:  # would reach the Jinja context and be silently ignored
            raise ChatlabError("render() takes legacy `functions` as tools: pass "
                               "tools=chatlab.types.parse_tools(functions=...)")
        msgs, tool_list = as_messages(messages), as_tools(tools)
        self.check_tools(msgs, bool(tool_list))
        enc = self.encoder
        open_turn = False
        if self.renderer is not None:
            pieces = self.renderer(enc, msgs, tool_list, add_generation_prompt, options)
        elif self.template is not None:
            composer = Composer(self.template, enc, msgs, tool_list, options)
            pieces = composer.render(add_generation_prompt)
            open_turn = composer.open
        else:
            pieces = jinja_pieces(self.chat_template or "", enc, [vllm_message(m) for m in msgs],
                                  [t.to_openai() for t in tool_list], add_generation_prompt, options)
        ids, text, slots = encode_pieces(enc, pieces)
        if self.engine_bos and enc.adds_bos and enc.bos_id is not None and (self.engine_bos == "ollama" or ids[:1] != [enc.bos_id]):
            ids, text, slots = encode_pieces(enc, [Piece("special", enc.bos_id, -1, "bos"), *pieces])
        words, stop_ids = self.stops(bool(tool_list))
        return Rendered(ids=ids, text=text, slot_map=slots, stop_words=words, stop_ids=stop_ids,
                        rule=self.rule, reason=self.reason, template=self.name, encoder=enc,
                        open_turn=open_turn)

    def check_tools(self, msgs: Sequence[Message], tools: bool) -> None:
        """Refuse, naming the template and what it lacks, a request whose tools or earlier calls
        it would leave out of the prompt (a template without a tool format refuses in Composer)."""
        if self.chat_template is None:
            return
        with_tools = ", ".join(n for n, t in TEMPLATES.items() if t.tool_format)
        if tools and not self.writes_tools:
            raise ChatlabError(f"{self.label} has no tool section (it never reads `tools`), so the tools "
                               "would not reach the model; send the request without tools, or use a "
                               f"template that writes them (a file, or a built-in: {with_tools})", param="tools")
        calls = next((i for i, m in enumerate(msgs) if m.tool_calls), None)
        if calls is not None and "tool_calls" not in self.chat_template:
            raise ChatlabError(f"messages[{calls}] has tool calls, but {self.label} never writes "
                               "`tool_calls`, so they would vanish from the prompt; send them as content, "
                               f"or use a template that writes calls (a file, or a built-in: {with_tools})",
                               param=f"messages[{calls}].tool_calls")

    def render_request(self, messages: Jsonable, tools: Jsonable = None, add_generation_prompt: bool = True,
                       **options: Jsonable) -> tuple["Resolution", Rendered]:
        """A request's render, as the server, `chatlab render` and `chatlab certify` all do it: a
        request with tools, or with tool calls or results in its history, goes to `for_tools`.
        Returns the resolution used and its render."""
        msgs, tool_list = as_messages(messages), as_tools(tools)
        used = self
        if tool_list or any(m.tool_calls or m.role == "tool" for m in msgs):
            used = self.for_tools()
        return used, used.render(msgs, tool_list or None, add_generation_prompt, **options)

    def explain(self) -> str:
        return f"{self.name} (rule {self.rule}): {self.reason}"

    def for_tools(self) -> "Resolution":
        """This resolution, unless the model store names a built-in for the model's tool requests
        because its own chat_template has no tool section (SmolLM2's GGUF template ignores tools;
        the `smollm2` built-in is the same ChatML layout with Hermes tools). Nothing else is ever
        substituted: a template that cannot carry the request refuses it (`check_tools`)."""
        if self.tools_template is None or self.writes_tools:
            return self
        name = self.tools_template
        fmt = get_template(name).tool_format
        return builtin_resolution(self.tokenizer, name, "tools-fallback",
                                  f"the {self.name!r} template has no tool section, and the model store names "
                                  f"the built-in {name!r} template for this model's tool requests "
                                  f"({fmt.name if fmt else 'no'} tool format)")


def by_model_type(who: str) -> tuple[str, str] | None:
    """(hint, template name) of the most specific model-type hint in `who` ("qwen3" before "qwen")."""
    hints = sorted(((h, t.name) for t in TEMPLATES.values() for h in t.model_types), key=lambda x: -len(x[0]))
    lowered = who.lower()
    return next(((h, n) for h, n in hints if h in lowered), None)


def builtin_resolution(tokenizer: HFTokenizer, name: str, rule: str, reason: str) -> Resolution:
    t = get_template(name)
    return Resolution(rule, reason, name, tokenizer, template=t, tool_format=t.tool_format)


# (pattern over model name / tokenizer class, template, why its renderer is code)
MODEL_RENDERERS = [
    (r"chatglm3|chatglm-?3|ChatGLM3Tokenizer", "chatglm3",
     "ChatGLM3's official prompt is build_chat_input (role tokens as single ids); its chat_template, "
     "once encoded, splits <|user|> and friends into ordinary pieces"),
    (r"chatglm2", "chatglm2", "ChatGLM2 builds its [Round n] prompt in code (build_prompt)"),
    (r"qwen1-tokenizer|qwen-(?:1_8b|7b|14b|72b)-chat|Qwen1Tokenizer|QWenTokenizer", "qwen",
     "Qwen-1 ships no chat_template; its make_context builds ChatML in code, with ReAct for tools"),
    (r"baichuan2", "baichuan2", "Baichuan2 builds its prompt in code (build_chat_input)"),
]


def resolve(tokenizer: HFTokenizer, model_name: str | None = None,
            template: "TemplateChoice" = None) -> Resolution:
    """`template`: a built-in name, a template file (Jinja, LMDeploy JSON, Ollama Modelfile,
    LLaMA-Factory slots: chatlab.render.io), a LoadedTemplate, or a Resolution (used as it is);
    None resolves by the chain."""
    if isinstance(template, Resolution):
        return template
    if template is not None and (not isinstance(template, str) or template not in TEMPLATES):
        from chatlab.render.io.loaded import load_template  # cycle: render.io -> io.diff -> here

        return of_loaded(load_template(template), tokenizer)
    if template:
        return builtin_resolution(tokenizer, template, "explicit", f"the template {template!r} was named explicitly")
    who = identity_of(tokenizer, model_name)
    for pattern, name, why in MODEL_RENDERERS:
        if re.search(pattern, who, re.IGNORECASE):
            return builtin_resolution(tokenizer, name, "model-renderer", why)
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, dict):  # several named templates: the default one
        source = source.get("default")
    if isinstance(source, str) and source.strip():
        asset = ASSETS.get(model_name or "")
        return Resolution("tokenizer-template", "the tokenizer ships a chat_template; it is rendered in "
                          "the sandbox and encoded so that content never becomes control ids",
                          "tokenizer", tokenizer, chat_template=source, tool_format=format_of_chat_template(source),
                          tools_template=(asset.tool_template or None) if asset else None)
    found = by_model_type(who)
    if found:
        hint, name = found
        return builtin_resolution(tokenizer, name, "model-type",
                                  f"no chat_template; the model name/type mentions {hint!r}")
    return builtin_resolution(tokenizer, "chatml", "chatml-fallback",
                              "no explicit template, no model renderer, no chat_template and no known "
                              "model type: ChatML is the common default")


def render_ids(tokenizer: HFTokenizer, messages: Jsonable, tools: Jsonable = None,
               add_generation_prompt: bool = True, *, template: "TemplateChoice" = None,
               model_name: str | None = None, **options: Jsonable) -> Rendered:
    """Resolve, then render: the one-call form."""
    return resolve(tokenizer, model_name, template).render(messages, tools, add_generation_prompt, **options)


def of_loaded(loaded: "LoadedTemplate", tokenizer: HFTokenizer) -> Resolution:
    """A template file chatlab.render.io read, as a Resolution (rule "explicit")."""
    why = f"the template {loaded.name!r} was named explicitly ({loaded.fmt}" + (
        f" from {loaded.source})" if loaded.source else ")")
    if loaded.template is not None:
        return Resolution("explicit", why, loaded.name, tokenizer, template=loaded.template,
                          tool_format=loaded.template.tool_format, engine_bos=loaded.engine_bos)
    if loaded.jinja is not None:
        return Resolution("explicit", why, loaded.name, tokenizer, chat_template=loaded.jinja,
                          tool_format=format_of_chat_template(loaded.jinja))
    from chatlab.render.io.ollama import render_modelfile  # cycle: render.io -> io.diff -> here

    assert loaded.modelfile is not None  # the Ollama reader sets it
    return Resolution("explicit", why, loaded.name, tokenizer, renderer=partial(render_modelfile, loaded.modelfile),
                      stop_strings=tuple(loaded.stop_words), engine_bos=loaded.engine_bos,
                      tool_format=format_of_chat_template(loaded.modelfile.template))
