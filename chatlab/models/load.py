"""Load a tokenizer or a chat model by asset name, local folder, or hub id."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

from chatlab._thirdparty import Embedding, HFModel, HFTokenizer, Jsonable
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.models import convert
from chatlab.models.assets import ASSETS, get_asset, names_of
from chatlab.models.hub import _check_name, _exists, _from_folder, from_hub
from chatlab.models.qwen1 import Qwen1Tokenizer
from chatlab.models.store import asset_path


def load_tokenizer(name: str) -> HFTokenizer:
    """A tokenizer: an asset name, a local folder, or a hub id (online only)."""
    from transformers import AutoTokenizer

    _check_name(name)
    if name == "qwen1-tokenizer":
        return Qwen1Tokenizer(asset_path(name))
    if name in ASSETS:
        asset = ASSETS[name]
        if asset.build == "stand-in":
            return convert.hub_or_standin(asset)
        return AutoTokenizer.from_pretrained(asset_path(name))
    if _exists(name):
        return _from_folder(AutoTokenizer.from_pretrained, name)
    return from_hub(AutoTokenizer.from_pretrained, name, trust_remote_code=True)


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Within the block, load weights with no progress bar and no warning-level load report."""
    from transformers.utils import logging

    bar_was, level_was = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level_was)
        if bar_was:
            logging.enable_progress_bar()


def load_embedding(name: str = "minilm-l6-v2", device: str = "cpu") -> Embedding:
    """A llama-index embedding model for an embeddings asset, loaded quietly."""
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    if name not in names_of("embeddings"):
        raise UnknownNameError("embeddings asset", name, names_of("embeddings"))
    with quiet_loading():
        return HuggingFaceEmbedding(model_name=str(asset_path(name)), device=device)


def load_model(name: str, dtype: str = "float32") -> tuple[HFModel, HFTokenizer]:
    """(model, tokenizer) for a chat model: an asset name, a local folder, or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM

    with quiet_loading():
        _check_name(name)
        torch_dtype = getattr(torch, dtype)
        if name in ASSETS:
            if ASSETS[name].kind != "chat-model":
                raise UnknownNameError("chat model", name, names_of("chat-model"))
            model = AutoModelForCausalLM.from_pretrained(asset_path(name), dtype=torch_dtype)
        elif _exists(name):
            model = _from_folder(AutoModelForCausalLM.from_pretrained, name, dtype=torch_dtype)
        else:
            model = from_hub(AutoModelForCausalLM.from_pretrained, name, dtype=torch_dtype,
                             trust_remote_code=True)
        return model.eval(), load_tokenizer(name)


def load_gguf_tokenizer(model: str) -> HFTokenizer:
    """The tokenizer transformers builds from the shipped GGUF (wrong in 5.5.4: see reference)."""
    from transformers import AutoTokenizer

    files = get_asset(model).source_files()
    if not files or not files[0].name.endswith(".gguf"):
        raise ChatlabError(f"{model} has no single GGUF file here; --gguf works for smollm2-135m-instruct")
    return AutoTokenizer.from_pretrained(str(files[0].parent), gguf_file=files[0].name)


def generation_config_of(model: str) -> dict[str, Jsonable] | None:
    if model not in names_of("chat-model"):
        return None
    path = asset_path(model) / "generation_config.json"
    return json.loads(path.read_text()) if path.exists() else None
