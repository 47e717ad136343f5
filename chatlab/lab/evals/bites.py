"""The headline bugs, measured on a live model beside their fixes: split role markers, a missing stop."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from chatlab._thirdparty import HFTokenizer
from chatlab.generate import Finished, SamplingParams, generate
from chatlab.lab.evals.sets import Fact
from chatlab.protocols import StepBackend
from chatlab.render import Resolution

# what a reply that lost the turn structure writes back: role markers, SmolLM2's system prompt
TEMPLATE_MARKUP = ("<|im_start|>", "<|im_end|>", "im_start", "You are a helpful AI assistant")

# what one reply's text shows, in the order `verdict` checks them
VERDICTS = ("new turn", "never ends", "goes on", "ends")


def verdict(shown: str, finish_reason: str) -> str:
    """What a reader sees in one reply to a one-fact question (`shown`: the text before its own end of
    turn, special tokens shown): "new turn" (chat markup or the system prompt: it plays the next turn),
    "never ends" (it ran to max_tokens), "goes on" (more than the one line a fact needs), or "ends"."""
    if finish_reason not in ("stop", "length"):
        raise ValueError(f"finish_reason must be 'stop' or 'length', not {finish_reason!r}")
    text = shown.strip()
    if any(m in text for m in TEMPLATE_MARKUP):
        return "new turn"
    if finish_reason == "length":
        return "never ends"
    return "goes on" if "\n" in text else "ends"


@dataclass(frozen=True)
class Reply:
    id: str
    text: str            # everything generated, special tokens shown
    answer: str          # the reply proper: the text before its own end of turn
    tokens: int          # tokens generated
    finish_reason: str   # "stop" or "length"
    correct: bool        # the answer holds a key phrase
    invented_turn: bool  # after its end of turn it wrote a next user turn itself
    markup: bool         # the reply proper writes chat markup or the system prompt back as text
    wasted: int          # tokens generated after the reply's own end of turn
    verdict: str         # what its text shows: one of VERDICTS


@dataclass
class Column:
    label: str
    replies: list[Reply]
    seconds: float
    prompts: list[list[int]] = field(default_factory=list)  # the prompt ids, one per reply

    @property
    def n(self) -> int:
        return len(self.replies)

    def count(self, what: str) -> int:
        if what == "length":
            return sum(r.finish_reason == "length" for r in self.replies)
        if what in VERDICTS:
            return sum(r.verdict == what for r in self.replies)
        return sum(bool(getattr(r, what)) for r in self.replies)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.replies)

    @property
    def wasted(self) -> int:
        return sum(r.wasted for r in self.replies)


def split_marker_ids(tok: HFTokenizer, text: str) -> list[int]:
    """Encode chat text as ChatGLM3's template path does `<|user|>`: every special token in it as
    ordinary pieces (its first character and the rest, encoded apart), the rest as usual."""
    specials = sorted({t for t in tok.all_special_tokens if t and t in text}, key=len, reverse=True)
    ids: list[int] = []
    rest = text
    while rest:
        hits = [(rest.find(s), s) for s in specials if s in rest]
        if not hits:
            ids += tok.encode(rest, add_special_tokens=False)
            break
        at, s = min(hits, key=lambda h: (h[0], -len(h[1])))
        if at:
            ids += tok.encode(rest[:at], add_special_tokens=False)
        ids += tok.encode(s[:1], add_special_tokens=False) + tok.encode(s[1:], add_special_tokens=False)
        rest = rest[at + len(s):]
    special_ids = set(tok.all_special_ids)
    assert not special_ids & set(ids), "a split marker still produced a control id"
    return ids


def template_ids(tok: HFTokenizer, chat: list[dict[str, str]]) -> list[int]:
    """The usual Hugging Face path (chat_template, then encode): right if control tokens stay whole."""
    out = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    ids = out if isinstance(out, list) else out["input_ids"]
    return [int(i) for i in ids]


def ask(backend: StepBackend, prompt_ids: list[int], stop_ids: Sequence[int], max_tokens: int) -> Finished:
    """Greedy, stopping only on `stop_ids`: the model's eos ids are not added."""
    params = SamplingParams(max_new_tokens=max_tokens, stop_ids=list(stop_ids), ignore_eos=True)
    last = list(generate(backend, list(prompt_ids), params))[-1]
    assert isinstance(last, Finished)  # the loop always ends with one
    return last


def _reply(tok: HFTokenizer, fact: Fact, finished: Finished, end_id: int, start_id: int | None) -> Reply:
    ids = list(finished.token_ids)
    end = ids.index(end_id) if end_id in ids else len(ids)
    answer = tok.decode(ids[:end], skip_special_tokens=True)
    shown = tok.decode(ids[:end], skip_special_tokens=False)
    after = ids[end + 1:]
    # a next user turn: the start marker, then "user" (the model writes the role as text)
    invented = start_id is not None and any(
        t == start_id and tok.decode(after[k + 1:k + 3]).lstrip().startswith("user") for k, t in enumerate(after))
    return Reply(id=fact.id, text=tok.decode(ids, skip_special_tokens=False), answer=answer,
                 tokens=len(ids), finish_reason=finished.finish_reason,
                 correct=any(k.lower() in answer.lower() for k in fact.answer),
                 invented_turn=invented, wasted=len(after),
                 markup=any(m in answer for m in TEMPLATE_MARKUP), verdict=verdict(shown, finished.finish_reason))


def _column(label: str, backend: StepBackend, facts: Sequence[Fact], prompts: list[list[int]],
            stop_ids: Sequence[int], max_tokens: int) -> Column:
    tok = backend.tokenizer
    # one token per call: the list form is transformers' alone, not every tokenizer's here
    end_id, start_id = (tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|im_start|>"))
    t0, replies = time.perf_counter(), []
    for fact, ids in zip(facts, prompts):
        replies.append(_reply(tok, fact, ask(backend, ids, stop_ids, max_tokens), end_id, start_id))
    return Column(label, replies, time.perf_counter() - t0, [list(p) for p in prompts])


def _chats(facts: Sequence[Fact]) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f.question}] for f in facts]


def split_markers_bite(backend: StepBackend, resolution: Resolution, facts: Sequence[Fact],
                       max_tokens: int = 128) -> tuple[Column, Column, Column]:
    """(role markers split into text pieces, id-level prompt, the tokenizer's own template: the
    positive control), all stopping on the template's stop ids: only the prompt differs."""
    tok = backend.tokenizer
    chats = _chats(facts)
    rendered = [resolution.render(chat) for chat in chats]
    stops = list(rendered[0].stop_ids)
    split = _column("markers split into text", backend, facts,
                    [split_marker_ids(tok, r.text) for r in rendered], stops, max_tokens)
    fixed = _column("id-level prompt", backend, facts, [list(r.ids) for r in rendered], stops, max_tokens)
    control = _column("tokenizer's own template", backend, facts, [template_ids(tok, c) for c in chats],
                      stops, max_tokens)
    return split, fixed, control


def missing_stop_bite(backend: StepBackend, resolution: Resolution, facts: Sequence[Fact],
                      max_tokens: int = 64) -> tuple[Column, Column, Column]:
    """(stop only on `<|endoftext|>`, on the template's stop ids, on generation_config's end ids as
    transformers' `generate` does: the positive control), the same id-level prompts in all three."""
    tok = backend.tokenizer
    rendered = [resolution.render(chat) for chat in _chats(facts)]
    prompts = [list(r.ids) for r in rendered]
    end_of_text = tok.convert_tokens_to_ids("<|endoftext|>")
    broken = _column("stop: <|endoftext|> only", backend, facts, prompts, [end_of_text], max_tokens)
    fixed = _column("stop: the template's <|im_end|>", backend, facts, prompts,
                    list(rendered[0].stop_ids), max_tokens)
    names = "".join(tok.convert_ids_to_tokens(list(backend.eos_ids)))
    control = _column(f"stop: generation_config's {names}", backend, facts, prompts,
                      list(backend.eos_ids), max_tokens)
    return broken, fixed, control


def table(columns: Sequence[Column], rows: Sequence[tuple[str, str]], max_tokens: int) -> str:
    """A small text table: one row per (label, measure), one column per condition."""
    def cell(c: Column, what: str) -> str:
        if what in ("tokens", "wasted"):
            return str(getattr(c, what))
        if what == "seconds":
            return f"{c.seconds:.1f} s"
        return f"{c.count(what)}/{c.n}"
    first = max(len(label) for label, _ in rows) + 2
    widths = [max(len(c.label), 10) + 2 for c in columns]
    lines = [" " * first + "".join(c.label.ljust(w) for c, w in zip(columns, widths))]
    for label, what in rows:
        label = label.replace("{max_tokens}", str(max_tokens))
        lines.append(label.ljust(first) + "".join(cell(c, what).ljust(w) for c, w in zip(columns, widths)))
    return "\n".join(line.rstrip() for line in lines)
