"""One small interface over the tokenizers chatlab renders for.

The renderer needs four things from a tokenizer: the one id of a special token, which special
texts the tokenizer itself would match inside *template* text (so template text encodes exactly
as Hugging Face encodes a rendered chat_template), an encoding of *content* that never matches
any special text (so content cannot inject control ids), and char offsets to map ids back to
the pieces they came from. Fast HF tokenizers, slow ones (ChatGLM3) and tiktoken (Qwen-1)
provide these in different ways; `Encoder` hides that.
"""
from __future__ import annotations

import json
import re
import weakref
from functools import cached_property

from chatlab._thirdparty import Decoder, HFTokenizer
from chatlab.errors import ChatlabError, MissingSpecialToken

_cache: "weakref.WeakKeyDictionary[HFTokenizer, Encoder]" = weakref.WeakKeyDictionary()


def encoder_for(tokenizer: HFTokenizer) -> "Encoder":
    """The (cached) Encoder of a tokenizer: building the plain twin of a fast one is slow."""
    try:
        enc = _cache.get(tokenizer)
    except TypeError:  # not weak-referenceable
        return Encoder(tokenizer)
    if enc is None:
        enc = _cache[tokenizer] = Encoder(tokenizer)
    return enc


class Encoder:
    def __init__(self, tokenizer: HFTokenizer) -> None:
        self.tokenizer = tokenizer
        if hasattr(tokenizer, "special_ids"):  # Qwen1Tokenizer (tiktoken)
            self.added: dict[str, int] = dict(tokenizer.special_ids)
        else:
            added = getattr(tokenizer, "added_tokens_encoder", {})
            self.added = {str(k): int(v) for k, v in added.items()}
        # Role tokens kept outside the vocabulary (ChatGLM3) are reachable only by name.
        self.extra_specials: dict[str, int] = dict(getattr(getattr(tokenizer, "tokenizer", None),
                                                           "special_tokens", {}) or {})
        self.special_text = {i: t for t, i in {**self.extra_specials, **self.added}.items()}
        alternatives = sorted(self.added, key=len, reverse=True)
        self.added_re = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        self.bos_id = getattr(tokenizer, "bos_token_id", None)
        self.eos_id = getattr(tokenizer, "eos_token_id", None)
        self.bos_token = getattr(tokenizer, "bos_token", None)
        self.eos_token = getattr(tokenizer, "eos_token", None)
        self.kind = self._detect()
        self._plain = self._plain_backend() if self.kind == "fast" else None

    def _detect(self) -> str:
        if hasattr(self.tokenizer, "enc") and hasattr(self.tokenizer, "special_ids"):
            return "tiktoken"
        if hasattr(self.tokenizer, "backend_tokenizer"):
            return "fast"
        if hasattr(getattr(self.tokenizer, "tokenizer", None), "sp_model"):
            return "sentencepiece"
        if hasattr(self.tokenizer, "_tokenize"):
            return "slow"
        raise ChatlabError(f"cannot render for a {type(self.tokenizer).__name__}; pass a Hugging Face "
                           "tokenizer, a chatlab store tokenizer, or a model name from `chatlab models`")

    def _plain_backend(self) -> Decoder:
        """A twin of the Rust tokenizer with no added tokens: it cannot match special text."""
        from tokenizers import Tokenizer

        spec = json.loads(self.tokenizer.backend_tokenizer.to_str())
        spec["added_tokens"] = []
        return Tokenizer.from_str(json.dumps(spec))

    @cached_property
    def adds_bos(self) -> bool:
        """Whether encoding a prompt the ordinary way (special tokens on) puts the bos id first:
        what an engine that tokenizes the rendered text itself gets (LMDeploy's
        `encode(prompt, add_bos=True)`, llama.cpp's `add_special` under Ollama, which reads the
        GGUF's add_bos_token, the same flag as the Hugging Face tokenizer's)."""
        if self.bos_id is None:
            return False
        if self.kind in ("fast", "slow"):
            try:
                ids = self.tokenizer.encode("a", add_special_tokens=True)
            except Exception:  # noqa: BLE001 - an exotic tokenizer: fall back on its flag
                return bool(getattr(self.tokenizer, "add_bos_token", False))
            return bool(ids) and ids[0] == self.bos_id
        return bool(getattr(self.tokenizer, "add_bos_token", False))

    def special_id(self, token: str, template: str = "") -> int:
        """The single id of a special token, or a ChatlabError naming the fix."""
        if token in self.added:
            return self.added[token]
        if token in self.extra_specials:
            return self.extra_specials[token]
        ids = self.encode_plain(token)[0]
        if len(ids) == 1:  # an ordinary single piece (e.g. "sop" in a plain vocabulary)
            return ids[0]
        name = getattr(self.tokenizer, "name_or_path", type(self.tokenizer).__name__)
        raise MissingSpecialToken(f"template {template or '?'} needs the special token {token!r}, which the "
                                  f"tokenizer {name} does not have; choose a template made for this "
                                  "tokenizer (`chatlab templates`) or add the token to the tokenizer", token)

    def split_specials(self, text: str) -> list[str | int]:
        """Template text cut where the tokenizer would match its own added tokens."""
        if self.added_re is None:
            return [text] if text else []
        out: list[str | int] = []
        last = 0
        for m in self.added_re.finditer(text):
            if m.start() > last:
                out.append(text[last:m.start()])
            out.append(self.added[m.group()])
            last = m.end()
        if last < len(text):
            out.append(text[last:])
        return out

    @cached_property
    def _fragments(self) -> tuple[str, set[str], set[str], int, re.Pattern[str] | None]:
        """Lower-cased special texts: all joined, their proper heads and tails, the longest, a regex."""
        texts = sorted({t.lower() for t in (*self.added, *self.extra_specials) if t}, key=len, reverse=True)
        heads = {t[:k] for t in texts for k in range(1, len(t))}
        tails = {t[k:] for t in texts for k in range(1, len(t))}
        pattern = re.compile("|".join(map(re.escape, texts))) if texts else None
        return "\x00".join(texts), heads, tails, max(map(len, texts), default=0), pattern

    def could_form_special(self, text: str) -> bool:
        """Whether `text`, written into template text, could be (part of) a special-token match.

        True when it holds a special text, lies inside one, or starts with the tail / ends with
        the head of one (so template text next to it could complete the token). Checked case-
        insensitively and on its JSON-escaped forms too, since templates may upper-case a
        string or write it through `tojson`. Strings for which this is False cannot produce a
        control id wherever a template puts them, so they may be left unmarked."""
        joined, heads, tails, longest, pattern = self._fragments
        if pattern is None or not text:
            return False
        for form in {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}:
            s = form.lower()
            if pattern.search(s) or s in joined:
                return True
            for k in range(1, min(len(s), longest) + 1):
                if s[-k:] in heads or s[:k] in tails:
                    return True
        return False

    def encode_plain(self, text: str, offsets: bool = False) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Content encoding: every character is text, never a control id. Char offsets if asked."""
        if not text:
            return [], [] if offsets else None
        if self._plain is not None:  # kind "fast"
            enc = self._plain.encode(text, add_special_tokens=False)
            return enc.ids, (enc.offsets if offsets else None)
        if self.kind == "tiktoken":
            ids = self.tokenizer.enc.encode(text, disallowed_special=())
            if not offsets:
                return ids, None
            _, starts = self.tokenizer.enc.decode_with_offsets(ids)
            return ids, list(zip(starts, starts[1:] + [len(text)]))
        if self.kind == "sentencepiece":
            sp = self.tokenizer.tokenizer.sp_model
            if not offsets:
                return sp.encode(text), None
            pieces = sp.encode(text, out_type=str)
            return [sp.piece_to_id(p) for p in pieces], _piece_offsets(pieces, len(text))
        ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer._tokenize(text))
        if not offsets:
            return ids, None
        ends = [len(self.tokenizer.decode(ids[:k + 1])) for k in range(len(ids))]
        return ids, list(zip([0] + ends[:-1], ends))

    def encode_many(self, texts: list[str],
                    offsets: list[bool]) -> list[tuple[list[int], list[tuple[int, int]] | None]]:
        """encode_plain over several texts; one batched (multi-threaded) call for fast tokenizers."""
        if self._plain is not None and texts:  # kind "fast"
            batch = self._plain.encode_batch(texts, add_special_tokens=False)
            return [(e.ids, e.offsets if want else None) for e, want in zip(batch, offsets)]
        return [self.encode_plain(t, offsets=want) for t, want in zip(texts, offsets)]

    def tokens(self, ids: list[int]) -> list[str]:
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))


def _piece_offsets(pieces: list[str], length: int) -> list[tuple[int, int]]:
    """Char spans of SentencePiece pieces over the text (the dummy-prefix "▁" maps to nothing);
    byte-fallback pieces <0xNN> advance one char once the bytes of a character are complete.
    Approximate where the model normalizes text; used only to attribute ids to slots."""
    spans, pos, pending = [], -1, b""
    for piece in pieces:
        start = max(pos, 0)
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            pending += bytes([int(piece[3:5], 16)])
            try:
                pending.decode("utf-8")
                pos, pending = pos + 1 + (pos < 0), b""
            except UnicodeDecodeError:
                pass
        else:
            pos += len(piece) + (pos < 0 and not piece.startswith("\u2581"))
        spans.append((min(start, length), min(max(pos, 0), length)))
    return spans
