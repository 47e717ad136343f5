"""ChatGLM3's tokenizer over any SentencePiece model: its 9 specials after the pieces, role tokens typed
by a user never matched (unless `encode_special_tokens`), and the official `build_chat_input`."""
from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from transformers import AddedToken, PreTrainedTokenizer
from transformers.tokenization_utils_base import BatchEncoding

from chatlab._thirdparty import HFTokenizer

COMMAND_TOKENS = ["[MASK]", "[gMASK]", "[sMASK]", "sop", "eop"]
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]


class SPTokenizer:
    """SentencePiece plus the 9 specials numbered after its vocabulary (as in ChatGLM3)."""

    def __init__(self, model_path: str | Path) -> None:
        from sentencepiece import SentencePieceProcessor

        self.sp_model = SentencePieceProcessor(model_file=str(model_path))
        self.n_words = self.sp_model.vocab_size()
        self.bos_id, self.eos_id = self.sp_model.bos_id(), self.sp_model.eos_id()
        self.pad_id = self.sp_model.unk_id()
        self.special_tokens = {t: self.n_words + i for i, t in enumerate(COMMAND_TOKENS + ROLE_TOKENS)}
        self.index_special_tokens = {i: t for t, i in self.special_tokens.items()}
        self.n_words += len(self.special_tokens)
        self.special_expression = "|".join(re.escape(t) for t in self.special_tokens)

    def tokenize(self, text: str, encode_special_tokens: bool = False) -> list[str]:
        if not encode_special_tokens:
            return self.sp_model.EncodeAsPieces(text)
        pieces: list[str] = []
        for i, part in enumerate(re.split(f"({self.special_expression})", text)):
            if i % 2:  # a special token
                pieces.append(part)
            elif part:
                pieces.extend(self.sp_model.EncodeAsPieces(part))
        return pieces

    def encode(self, text: str) -> list[int]:
        return self.sp_model.encode(text)

    def decode_ids(self, ids: list[int]) -> str:
        out: list[str] = []
        run: list[int] = []
        for i in ids:
            if i in self.index_special_tokens:
                out.append(self.sp_model.decode(run))
                out.append(self.index_special_tokens[i])
                run = []
            else:
                run.append(i)
        return "".join(out) + self.sp_model.decode(run)


class ChatGLM3Tokenizer(PreTrainedTokenizer):
    """The ChatGLM3 tokenizer surface: `get_command`, `build_single_message`, `build_chat_input`."""

    vocab_files_names = {"vocab_file": "tokenizer.model"}
    model_input_names = ["input_ids", "attention_mask", "position_ids"]

    def __init__(self, vocab_file: str, padding_side: str = "left", encode_special_tokens: bool = False,
                 **kwargs: object) -> None:
        self.name = "GLMTokenizer"
        self.vocab_file = vocab_file
        self.tokenizer = SPTokenizer(vocab_file)
        self.encode_special_tokens = encode_special_tokens
        kwargs = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>",
                  "clean_up_tokenization_spaces": False, **kwargs}
        kwargs.setdefault("added_tokens_decoder", {
            self.tokenizer.special_tokens[t]: AddedToken(t, special=True, normalized=False)
            for t in COMMAND_TOKENS})
        super().__init__(padding_side=padding_side, **kwargs)

    def get_command(self, token: str) -> int:
        if token in self.tokenizer.special_tokens:
            return self.tokenizer.special_tokens[token]
        raise KeyError(f"{token} is not a special token for {self.name}")

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.n_words

    def get_vocab(self) -> dict[str, int]:
        vocab = {self._convert_id_to_token(i): i for i in range(self.vocab_size)}
        vocab.update(self.added_tokens_encoder)
        return vocab

    def _tokenize(self, text: str, **kwargs: object) -> list[str]:
        return self.tokenizer.tokenize(text, encode_special_tokens=self.encode_special_tokens)

    def _convert_token_to_id(self, token: str) -> int:
        return self.tokenizer.special_tokens.get(token) or self.tokenizer.sp_model.PieceToId(token)

    def _convert_id_to_token(self, index: int) -> str:
        sp = self.tokenizer
        if index in sp.index_special_tokens:
            return sp.index_special_tokens[index]
        return sp.sp_model.IdToPiece(index) if 0 <= index < sp.sp_model.vocab_size() else ""

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return self.tokenizer.decode_ids([self._convert_token_to_id(t) for t in tokens])

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: object) -> str:
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if skip_special_tokens:
            token_ids = [i for i in token_ids if i not in self.tokenizer.index_special_tokens
                         and i not in (self.tokenizer.bos_id, self.tokenizer.eos_id)]
        return self.tokenizer.decode_ids(list(token_ids))

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        target = Path(save_directory) / ((filename_prefix or "") + "tokenizer.model")
        target.write_bytes(Path(self.vocab_file).read_bytes())
        return (str(target),)

    def get_prefix_tokens(self) -> list[int]:
        return [self.get_command("[gMASK]"), self.get_command("sop")]

    def build_inputs_with_special_tokens(self, token_ids_0: list[int],
                                         token_ids_1: list[int] | None = None) -> list[int]:
        ids = self.get_prefix_tokens() + token_ids_0
        if token_ids_1 is not None:
            ids = ids + token_ids_1 + [self.tokenizer.eos_id]
        return ids

    def build_single_message(self, role: str, metadata: str, message: str) -> list[int]:
        """`<|role|>` + encode(metadata + "\\n") + encode(message): three separate encodings."""
        assert role in ["system", "user", "assistant", "observation"], role
        role_tokens = [self.get_command(f"<|{role}|>")] + self.tokenizer.encode(f"{metadata}\n")
        return role_tokens + self.tokenizer.encode(message)

    def build_chat_input(self, query: str, history: list[dict] | None = None,
                         role: str = "user") -> BatchEncoding:
        """The official ChatGLM3 prompt: `[gMASK] sop`, each message, the new one, `<|assistant|>`."""
        import torch

        ids = self.get_prefix_tokens()
        for item in history or []:
            content = item["content"]
            if item["role"] == "system" and "tools" in item:
                content = content + "\n" + json.dumps(item["tools"], indent=4, ensure_ascii=False)
            ids.extend(self.build_single_message(item["role"], item.get("metadata", ""), content))
        ids.extend(self.build_single_message(role, "", query))
        ids.append(self.get_command("<|assistant|>"))
        tensor = torch.tensor([ids], dtype=torch.long)
        return BatchEncoding({"input_ids": tensor, "attention_mask": torch.ones_like(tensor),
                              "position_ids": torch.arange(len(ids)).unsqueeze(0)})


@contextmanager
def special_tokens_from_text(tok: HFTokenizer) -> Iterator[HFTokenizer]:
    """Within the block, `tok` turns role-token text such as `<|user|>` into the role's id
    (ChatGLM3's own `encode_special_tokens`, read by the real tokenizer and the stand-in alike)."""
    if not hasattr(tok, "encode_special_tokens"):
        raise TypeError(f"{type(tok).__name__} has no encode_special_tokens flag: not a ChatGLM3 tokenizer")
    before = tok.encode_special_tokens
    tok.encode_special_tokens = True
    try:
        yield tok
    finally:
        tok.encode_special_tokens = before
