"""llama.cpp (`llama-cpp-python`) as an optional benchmark engine, on the shipped Q4_1 GGUF as it is.
Its matrix products quantize activations to 8 bits and it has no bf16 mode: a bf16 bench skips it."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from chatlab._thirdparty import Jsonable
from chatlab.backends.precision import cpu
from chatlab.lab.bench.timing import Stamp, Timing, from_stamps
from chatlab.models import get_asset

ENGINE = "llama.cpp-q4_1"  # its row in chatlab.lab.bench.engines
COMPUTE = "q4_1 weights x q8_1 activations (int dot products), f32 elsewhere, f32 KV cache"
N_CTX = 2048  # the ~1,000-token prompt plus new tokens, with room to spare


def installed() -> bool:
    """Whether `llama_cpp` can be imported, found without importing it (it loads a C++ library)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):  # a broken install, or a module set to None
        return False


def unavailable(precision: str) -> str | None:
    """Why this engine cannot run here (None when it can)."""
    if not installed():
        return ("llama-cpp-python is not installed; install it with pip install -e '.[llamacpp]' "
                "(compiles llama.cpp)")
    if precision != "f32":
        return f"llama.cpp has no {precision} compute for Q4_1 weights; run it with --precision f32"
    if gguf_path() is None:
        return f"the Q4_1 GGUF is not installed; {get_asset('smollm2-135m-instruct').install_hint}"
    return None


def gguf_path(model: str = "smollm2-135m-instruct") -> Path | None:
    files = get_asset(model).source_files()
    return files[0] if files and files[0].name.endswith(".gguf") else None


# three tokens of the GGUF with llama.cpp's defaults, run in a child process by extra_buffers_run
PROBE = ("import sys, llama_cpp; llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, verbose=False); "
         "llm.eval([1, 2, 3])")


def extra_buffers_run(path: Path) -> bool:
    """Whether llama.cpp's extra buffer types run here: on an AMX CPU their tile loads can stop the
    process with SIGILL, so a three-token run in a child process decides."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, timeout=300)
    return done.returncode == 0


class LlamaCpp:
    """`Llama.generate()` over the shipped GGUF, greedy, fed the same ids as every engine."""

    def __init__(self, model: str, precision: str = "f32") -> None:
        self.model_name, self.precision = model, precision

    def load(self) -> None:
        import llama_cpp

        path = gguf_path(self.model_name)
        if path is None:
            raise FileNotFoundError(unavailable(self.precision))
        self.threads = cpu().threads
        f32 = llama_cpp.GGML_TYPE_F32
        self.extra_buffers = extra_buffers_run(path)
        low = llama_cpp.llama_cpp  # Llama() takes its model parameters from this module's defaults
        defaults = low.llama_model_default_params
        if not self.extra_buffers:
            def without_extra_buffers() -> object:
                params = defaults()
                params.use_extra_bufts = False
                return params

            low.llama_model_default_params = without_extra_buffers
        try:
            # an f32 KV cache (llama.cpp's default is f16): attention at the precision the others get
            self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=N_CTX, n_threads=self.threads,
                                       n_threads_batch=self.threads, type_k=f32, type_v=f32,
                                       verbose=False)
        finally:
            low.llama_model_default_params = defaults
        self.eos = int(self.llm.token_eos())  # SmolLM2's GGUF: <|im_end|>, where the others stop

    def facts(self) -> dict[str, Jsonable]:
        off = "" if self.extra_buffers else ("; extra buffer types (ggml's AMX kernels) off: "
                                             "they stopped with an illegal instruction on this CPU")
        return {"precision": "f32", "threads": self.threads, "compute": COMPUTE + off}

    def run(self, ids: list[int], n: int, stop_at_eos: bool = False) -> Timing:
        # else llama-cpp-python reuses the last call's cached prefix: a warm prompt against cold ones
        self.llm.reset()
        stamps: list[Stamp] = []
        tokens: list[int] = []
        t0 = time.perf_counter()
        # temp 0 is greedy; generate() never stops on eos itself, so n tokens come out unless asked
        for token in self.llm.generate(ids, temp=0.0, top_k=1, reset=True):
            stamps.append((time.perf_counter(), 1))  # generate() yields one token at a time
            tokens.append(int(token))
            if len(tokens) == n or (stop_at_eos and int(token) == self.eos):
                break
        return from_stamps(t0, stamps, tokens)
