"""Stand-ins for assets that no PyPI package ships: today the ChatGLM3 tokenizer.

Offline, a SentencePiece model is trained from the project's own text in `data/chatglm3_corpus/`
and cached, wrapped in `ChatGLM3Tokenizer` (the real tokenizer's layout, `tokenize` behaviour and
`build_chat_input`) with the chat_template the real model ships; only the pieces and so the
ordinary ids differ from THUDM/chatglm3-6b. When the hub (or the local Hugging Face cache) has
the real tokenizer, that one is used instead, and we say so.
"""
from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path

from chatlab._thirdparty import HFTokenizer
from chatlab.data import data_path
from chatlab.errors import AssetError, ChatlabError
from chatlab.models.assets import Asset
from chatlab.models.cache import atomic_folder, cache_dir
from chatlab.models.hub import from_hub

CORPUS = "chatglm3_corpus"  # a folder of chatlab's data (chatlab.data; CHATLAB_DATA moves it)
STANDIN_VERSION = 1  # bump when the stand-in trainer changes, so a built stand-in is rebuilt
VOCAB_SIZE = 2400  # a soft limit: the trainer stops earlier when the corpus runs out of merges

# The chat_template of THUDM/chatglm3-6b's tokenizer_config.json (rewritten here): role tokens as
# text, then "\n " so SentencePiece's dummy prefix lines up with build_chat_input for normal text.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n"
    " {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_announced: set[str] = set()


def _corpus_lines() -> list[str]:
    folder = data_path(CORPUS)  # a missing data folder is one message naming the fix
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise AssetError(f"the ChatGLM3 stand-in corpus is missing ({folder}/*.txt); "
                         "restore data/chatglm3_corpus from the repository (git checkout data)")
    # One sentence per line: a newline never enters the vocabulary, so "\n" stays the byte
    # piece <0x0A> (id 13), exactly as in the real tokenizer.
    return [line for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def _corpus_hash(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def train_model(lines: list[str]) -> bytes:
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=VOCAB_SIZE, model_type="bpe",
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        character_coverage=1.0, hard_vocab_limit=False, num_threads=1, minloglevel=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    return buf.getvalue()


def build(asset: Asset) -> Path:
    """The stand-in's folder (tokenizer.model + tokenizer_config.json), trained once and cached."""
    lines = _corpus_lines()
    digest = _corpus_hash(lines)
    folder = cache_dir(asset)
    try:
        manifest = json.loads((folder / "chatlab-asset.json").read_text())
        if manifest.get("corpus_sha256") == digest and manifest.get("build_version") == STANDIN_VERSION:
            return folder
    except (OSError, ValueError):
        pass
    with atomic_folder(folder) as tmp:
        (tmp / "tokenizer.model").write_bytes(train_model(lines))
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "ChatGLMTokenizer", "eos_token": "</s>", "pad_token": "<unk>",
            "unk_token": "<unk>", "padding_side": "left", "chat_template": CHAT_TEMPLATE,
            "remove_space": False, "do_lower_case": False}, indent=2, ensure_ascii=False))
        (tmp / "chatlab-asset.json").write_text(json.dumps({
            "name": asset.name, "stand_in_for": asset.hub_id, "corpus": f"data/{CORPUS}",
            "corpus_sha256": digest, "build_version": STANDIN_VERSION}, indent=2))
    return folder


def load_standin(asset: Asset, encode_special_tokens: bool = False) -> HFTokenizer:
    from chatlab.models.chatglm3 import ChatGLM3Tokenizer  # it imports transformers at its top

    folder = build(asset)
    tok = ChatGLM3Tokenizer(str(folder / "tokenizer.model"), chat_template=CHAT_TEMPLATE,
                            encode_special_tokens=encode_special_tokens)
    tok.name_or_path = asset.name
    tok.is_standin = True
    tok.chatlab_source = (f"offline stand-in for {asset.hub_id} (SentencePiece trained from "
                          f"data/chatglm3_corpus, {tok.tokenizer.sp_model.vocab_size()} pieces)")
    return tok


def _announce(asset: Asset, message: str) -> None:
    if asset.name not in _announced:  # once per process, on stderr so JSON output stays clean
        _announced.add(asset.name)
        print(f"chatlab: {asset.name}: {message}", file=sys.stderr)


def hub_or_standin(asset: Asset) -> HFTokenizer:
    """The real hub tokenizer when reachable (or cached), else the offline stand-in."""
    from transformers import AutoTokenizer

    why = ""
    try:
        tok = from_hub(AutoTokenizer.from_pretrained, asset.hub_id, trust_remote_code=True)
    except ChatlabError:
        why = "the hub is not reachable"
    except Exception as err:  # the hub answered but its remote code failed here
        why = f"loading the real tokenizer failed ({type(err).__name__}: {err})"
    else:
        tok.is_standin = False
        tok.chatlab_source = f"the real {asset.hub_id} tokenizer"
        _announce(asset, f"using {tok.chatlab_source}")
        return tok
    tok = load_standin(asset)
    _announce(asset, f"using the {tok.chatlab_source}; {why}")
    return tok
