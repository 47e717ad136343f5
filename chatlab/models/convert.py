"""How the store builds an asset: a shipped GGUF as a Hugging Face folder (its tokenizer rebuilt from
the GGUF metadata: transformers builds it wrong), or the ChatGLM3 stand-in trained from data/."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

from chatlab._thirdparty import HFModel, HFTokenizer, Jsonable
from chatlab.data import data_path
from chatlab.errors import AssetError, ChatlabError
from chatlab.models.assets import Asset
from chatlab.models.cache import atomic_folder, cache_dir, read_json
from chatlab.models.hub import from_hub
from chatlab.models.qwen1 import QWEN_SPLIT

CONTROL, USER_DEFINED = 3, 4

# llama.cpp's GPT-2 pre-tokenizer regex (llama-vocab.cpp)
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"


def read_metadata(gguf_path: Path) -> dict[str, Jsonable]:
    """The tokenizer.* fields of a GGUF file as plain Python values."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(gguf_path))
    except Exception as err:  # gguf raises ValueError/struct errors on a damaged file
        raise AssetError(f"{gguf_path} is not a readable GGUF file ({err}); reinstall it") from err
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith(("tokenizer.", "general.name", "general.architecture")):
            meta[key] = field.contents()
    if "tokenizer.ggml.tokens" not in meta:
        raise AssetError(f"{gguf_path} has no tokenizer metadata; it cannot be served as chat")
    return meta


def _pre_tokenizer(pre: str):  # noqa: ANN202 - tokenizers types are untyped
    from tokenizers import Regex, pre_tokenizers

    if pre not in ("qwen2", "smollm", "starcoder", "refact", "gpt2"):
        raise AssetError(f"GGUF pre-tokenizer {pre!r} is not supported; "
                         "supported: qwen2, smollm, gpt2")
    # SmolLM splits every digit on its own before the GPT-2 regex.
    steps = [] if pre in ("qwen2", "gpt2") else [pre_tokenizers.Digits(individual_digits=True)]
    split = QWEN_SPLIT if pre == "qwen2" else GPT2_SPLIT
    return pre_tokenizers.Sequence([
        *steps, pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def build_tokenizer(meta: dict[str, Jsonable]):  # noqa: ANN201 - returns PreTrainedTokenizerFast
    """A PreTrainedTokenizerFast equal to the one the GGUF was made from."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise AssetError("only byte-level BPE GGUF tokenizers (tokenizer.ggml.model 'gpt2') are supported")
    # PreTrainedTokenizerFast and the post-processor below add no BOS
    if meta.get("tokenizer.ggml.add_bos_token"):
        raise AssetError("GGUF tokenizers that add a BOS are not supported by this converter")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta["tokenizer.ggml.token_type"])
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    model = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(model)
    tok.pre_tokenizer = _pre_tokenizer(meta.get("tokenizer.ggml.pre", "gpt2"))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Control and user-defined tokens must match whole and never be split by BPE.
    specials = [AddedToken(tokens[i], special=True, normalized=False)
                for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
    tok.add_special_tokens(specials)

    def name(key: str) -> str | None:
        idx = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[int(idx)] if idx is not None and int(idx) < len(tokens) else None

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=name("bos"), eos_token=name("eos"),
                                   unk_token=name("unknown"), pad_token=name("padding") or name("eos"),
                                   chat_template=meta.get("tokenizer.chat_template"),
                                   clean_up_tokenization_spaces=False, model_max_length=32768)


ROUND_TRIP = "Hello, world! 1234 naïve café — 你好 🙂\n\tindented  twice"
PROBE_QUESTION = "What is the capital of France?"


def _single_gguf(paths: list[Path], work: Path) -> Path:
    """One GGUF file: the file itself, or the parts concatenated into `work`."""
    if len(paths) == 1:
        return paths[0]
    joined = work / "model.gguf"
    with open(joined, "wb") as out:
        for p in paths:
            with open(p, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 22)
    return joined


def convert_gguf(asset: Asset, paths: list[Path], out: Path) -> None:
    from tqdm.auto import tqdm

    steps = tqdm(total=4, desc=f"building {asset.name}", unit="step")
    # scratch space inside `out`: a killed build leaves one folder to sweep
    with tempfile.TemporaryDirectory(dir=out, prefix=".work-") as work:
        gguf = _single_gguf(paths, Path(work))
        steps.set_postfix_str("tokenizer from GGUF metadata")
        tokenizer = build_tokenizer(read_metadata(gguf))
        steps.update()

        steps.set_postfix_str("dequantizing weights")
        from transformers import AutoModelForCausalLM, GenerationConfig

        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        steps.update()
    steps.set_postfix_str("saving")
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    model.generation_config = GenerationConfig(**ids)
    for key, value in ids.items():
        setattr(model.config, key, value)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    steps.update()
    steps.set_postfix_str("verifying")
    verify_folder(out)
    steps.update()
    steps.close()


def verify_folder(folder: Path) -> dict[str, object]:
    """Reload the folder with plain transformers and check tokenizer and model behaviour."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok.encode(ROUND_TRIP, add_special_tokens=False)
    if tok.decode(ids) != ROUND_TRIP:
        raise AssetError(f"{folder}: tokenizer does not round-trip text; delete it and rebuild")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    for token in config.get("added_tokens_decoder", {}).values():
        if token.get("special") and len(tok.encode(token["content"], add_special_tokens=False)) != 1:
            raise AssetError(f"{folder}: control token {token['content']!r} is split into pieces")
    model: HFModel = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": PROBE_QUESTION}], add_generation_prompt=True, tokenize=False)
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=24, do_sample=False)
    answer = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    if "Paris" not in answer:
        raise AssetError(f"{folder}: the converted model answered {answer!r} to "
                         f"{PROBE_QUESTION!r} (expected Paris); the conversion is broken")
    return {"answer": answer}


# -- stand-ins for assets no package ships (the ChatGLM3 tokenizer) ----------------------
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
    # one sentence per line: "\n" stays the byte piece <0x0A>, as in the real tokenizer
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
    if read_json(folder / "chatlab-asset.json", corpus_sha256=digest, build_version=STANDIN_VERSION):
        return folder
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
