"""openvino-genai's ContinuousBatchingPipeline for many sequences at once: its one caller, a scheduler
thread, hands each stream its ids per step, then waits for the consumers (`step()` holds the GIL)."""
from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from pathlib import Path

import numpy as np

from chatlab._thirdparty import GenaiConfig, GenaiHandle, GenaiPipeline, LoaderOption
from chatlab.backends.export import export_model
from chatlab.backends.openvino import ExportBackend
from chatlab.backends.precision import DEFAULT_PRECISION, check_precision, ov_config
from chatlab.errors import ChatlabError

DEFAULT_MAX_SEQS = 8
HANDOFF_S = 0.02  # longest wait after a step for the consumers to take their ids


class GenaiStream:
    """One request's token ids, as lists per scheduler step; then the end (or an error)."""

    def __init__(self, rid: int, ids: list[int], config: GenaiConfig) -> None:
        self.rid, self.ids, self.config = rid, ids, config
        self.items: queue.SimpleQueue[list[int] | BaseException | None] = queue.SimpleQueue()
        self.cancelled = threading.Event()
        self.status: str | None = None  # genai's final status ("FINISHED", "CANCEL", ...)
        self.handle: GenaiHandle = None

    def get(self, timeout: float) -> list[int] | BaseException | None:
        """New ids; an error; None once the request has ended. Raises queue.Empty on timeout."""
        return self.items.get(timeout=timeout)

    def cancel(self) -> None:
        """Stop generating for this request (idempotent; the scheduler thread drops it)."""
        self.cancelled.set()


class GenaiBackend(ExportBackend):
    """An exported model with genai's batched pipeline as the compute (prefix caching off by default)."""

    def __init__(self, folder: Path, precision: str = DEFAULT_PRECISION, max_seqs: int = DEFAULT_MAX_SEQS,
                 cache_gb: float = 1.0, threads: int | None = None, name: str = "genai",
                 model_name: str | None = None, kv_cache_precision: str | None = None,
                 prefix_caching: bool = False, dynamic_quantization: bool | None = None) -> None:
        import openvino_genai as genai

        super().__init__(folder, None, model_name, name)
        precision = check_precision(precision)
        sched = genai.SchedulerConfig()
        sched.cache_size = max(1, int(round(cache_gb)))  # GB of paged KV cache
        sched.max_num_seqs = int(max_seqs)
        # Prompts are prefilled in chunks beside the running decodes (dynamic split-fuse).
        sched.max_num_batched_tokens = 256
        sched.dynamic_split_fuse = True
        sched.enable_prefix_caching = bool(prefix_caching)
        self.prefix_caching = bool(prefix_caching)
        config = ov_config(precision, threads, kv_cache_precision, dynamic_quantization)
        self._build = lambda: genai.ContinuousBatchingPipeline(str(folder), sched, "CPU", config)
        self.pipe: GenaiPipeline = self._build()
        self.rebuilds = 0  # pipelines replaced after a failed step (see _run)
        self.precision, self.threads = precision, threads  # genai does not report what it applied
        self.max_seqs = int(max_seqs)
        self.vocab_size = int(json.loads((folder / "config.json").read_text())["vocab_size"])
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._incoming: list[GenaiStream] = []
        self._active: dict[int, GenaiStream] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="chatlab-genai", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return (f"<GenaiBackend {self.name} {self.precision} vocab={self.vocab_size} "
                f"ctx={self.context_length} max_seqs={self.max_seqs}>")

    def submit(self, ids: list[int], config: GenaiConfig) -> GenaiStream:
        """Queue a prompt (token ids) with a genai GenerationConfig; tokens arrive on the stream."""
        stream = GenaiStream(next(self._ids), list(ids), config)
        with self._cond:
            if self._closed:
                raise ChatlabError("the genai backend has been closed; load it again")
            self._incoming.append(stream)
            self._cond.notify()
        return stream

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    @property
    def running(self) -> int:
        """How many requests the scheduler holds (a cancelled one leaves a step later)."""
        return len(self._active)

    def _run(self) -> None:
        """The scheduler thread: the only caller of the pipeline."""
        import openvino as ov

        while True:
            with self._cond:
                while not self._closed and not self._incoming and not self._active:
                    self._cond.wait()
                if self._closed:
                    break
                incoming, self._incoming = self._incoming, []
            for s in incoming:
                if s.cancelled.is_set():
                    self._end(s, "CANCEL")
                    continue
                try:
                    tensor = ov.Tensor(np.asarray([s.ids], dtype=np.int64))
                    s.handle = self.pipe.add_request(s.rid, tensor, s.config)
                except Exception as err:  # noqa: BLE001 - this request's config: its error only
                    s.items.put(ChatlabError(f"openvino-genai refused the request: {err}"))
                    self._end(s, "IGNORED")
                    continue
                self._active[s.rid] = s
            for s in self._active.values():
                if s.cancelled.is_set():
                    s.handle.cancel()  # the pipeline frees its blocks at the next step
            if not self.pipe.has_non_finished_requests():
                time.sleep(0.001)  # only cancelled or just-finished ones left: collect, no spin
            else:
                try:
                    self.pipe.step()
                except Exception as err:  # noqa: BLE001 - the pipeline failed: every stream hears
                    for s in list(self._active.values()):
                        s.items.put(ChatlabError(f"openvino-genai failed while generating: {err}"))
                        s.handle.cancel()
                        self._end(s, "FAILED")
                    self._active.clear()
                    self._rebuild()
                    continue
            self._collect()
            self._hand_off()
        for s in [*self._incoming, *self._active.values()]:
            s.items.put(ChatlabError("the genai backend was closed while this request ran"))
            self._end(s, "CANCEL")

    def _rebuild(self) -> None:
        """A fresh pipeline after a failed step (the failing request stays inside the old one)."""
        old, self.pipe = self.pipe, None
        del old  # its paged KV cache goes before the new one is allocated
        try:
            self.pipe = self._build()
        except Exception:  # noqa: BLE001 - no pipeline: refuse new requests rather than hang
            with self._cond:
                self._closed = True
            raise
        self.rebuilds += 1

    def _collect(self) -> None:
        from openvino_genai.py_openvino_genai import GenerationStatus

        for rid, s in list(self._active.items()):
            status = s.handle.get_status()
            if s.handle.can_read():
                new = [t for out in s.handle.read().values() for t in out.generated_ids]
                if new and not s.cancelled.is_set():
                    s.items.put(new)
            if status != GenerationStatus.RUNNING:
                self._end(s, status.name)
                del self._active[rid]

    def _hand_off(self) -> None:
        """Give the GIL to the consumers until they have taken this step's ids (see above)."""
        deadline = time.monotonic() + HANDOFF_S
        while any(not s.items.empty() for s in self._active.values()) and time.monotonic() < deadline:
            time.sleep(0.0005)
        time.sleep(0.0005)  # and to the event loop, which sends what the consumers emitted

    @staticmethod
    def _end(s: GenaiStream, status: str) -> None:
        s.status = status
        s.items.put(None)  # the end


def load(model_name: str, weight_format: str = "int8", precision: str = DEFAULT_PRECISION,
         **options: LoaderOption) -> GenaiBackend:
    """`model_name`'s export (made on first use) in a GenaiBackend; `options`: its own."""
    precision = check_precision(precision)  # before a first-use export of half a minute
    folder = export_model(model_name, weight_format)
    if not (folder / "openvino_tokenizer.xml").is_file():
        raise ChatlabError(f"{folder} has no openvino_tokenizer.xml, which openvino-genai needs; "
                           "re-export with `chatlab export --force` (openvino-tokenizers installed)")
    return GenaiBackend(folder, precision, name=f"genai-{weight_format}", model_name=model_name, **options)
