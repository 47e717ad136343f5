"""The model store: named offline assets, converted once into a cache, and hub ids online."""
from chatlab.models.assets import ASSETS, Asset, get_asset
from chatlab.models.hub import DEFAULT_MODEL, default_model, local_model, model_note
from chatlab.models.load import (generation_config_of, load_embedding, load_gguf_tokenizer, load_model, load_tokenizer,
                                 quiet_loading)
from chatlab.models.store import asset_path, chatlab_home, describe

__all__ = ["ASSETS", "Asset", "DEFAULT_MODEL", "asset_path", "chatlab_home", "default_model",
           "describe", "generation_config_of", "get_asset", "load_gguf_tokenizer", "load_embedding", "load_model", "local_model", "load_tokenizer", "model_note",
           "quiet_loading"]
