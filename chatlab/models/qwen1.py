"""Qwen-1's tiktoken tokenizer, offline, with the small HF-like surface chatlab uses (special
tokens sit above the 151,643 BPE ranks and come from text only when asked)."""
from __future__ import annotations

import base64
from pathlib import Path

# Qwen's pre-tokenizer regex (Qwen-1 and Qwen2 alike)
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]


class Qwen1Tokenizer:
    """encode/decode/convert_tokens_to_ids over tiktoken; eos is <|endoftext|> (151643)."""

    chat_template = None
    name_or_path = "qwen1-tokenizer"

    def __init__(self, tiktoken_file: Path) -> None:
        import tiktoken

        ranks = {}
        for line in Path(tiktoken_file).read_bytes().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        start = len(ranks)
        self.special_ids = {tok: start + i for i, tok in enumerate(SPECIALS)}
        self.enc = tiktoken.Encoding(
            "qwen1", pat_str=QWEN_SPLIT, mergeable_ranks=ranks, special_tokens=self.special_ids)
        self.eos_token, self.eos_token_id = "<|endoftext|>", self.special_ids["<|endoftext|>"]
        self.bos_token, self.bos_token_id = None, None
        self.all_special_tokens = list(SPECIALS)
        self._by_id = {i: t for t, i in self.special_ids.items()}

    def __len__(self) -> int:
        return self.enc.n_vocab

    def encode(self, text: str, add_special_tokens: bool = False, *, allow_special: bool = False) -> list[int]:
        """Text to ids. Special-token text in content stays plain text unless allow_special."""
        if allow_special:
            return self.enc.encode(text, allowed_special="all")
        return self.enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._by_id]
        return self.enc.decode(list(ids))

    def convert_tokens_to_ids(self, token: str) -> int:
        if token in self.special_ids:
            return self.special_ids[token]
        ids = self.enc.encode(token, disallowed_special=())
        if len(ids) != 1:
            raise KeyError(f"{token!r} is not a single token")
        return ids[0]

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self._by_id.get(i) or self.enc.decode_single_token_bytes(i).decode("utf-8", "replace")
                for i in ids]
