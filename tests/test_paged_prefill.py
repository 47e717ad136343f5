"""Long prompts prefilled on the paged-attention graph, decoded on the stateful one
(chatlab.backends.paged_prefill): the same tokens as the stateful graph alone."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from chatlab.generate import SamplingParams, generate

MODEL = "smollm2-135m-instruct"
pytestmark = pytest.mark.slow  # loads the int8 export twice


@pytest.fixture(scope="module")
def pair() -> tuple[Any, Any, dict[str, list[int]]]:
    from chatlab.backends.export import export_model
    from chatlab.backends.openvino import OpenVINOBackend
    from chatlab.bench.runner import bench_prompts

    folder = export_model(MODEL, "int8")
    paged = OpenVINOBackend(folder, precision="f32")
    stateful = OpenVINOBackend(folder, precision="f32", paged_prefill_from=None)
    return paged, stateful, bench_prompts(MODEL)


def tokens(backend: Any, ids: list[int], n: int = 40) -> list[int]:
    return list(generate(backend, ids, SamplingParams(max_new_tokens=n, ignore_eos=True)))[-1].token_ids


def test_long_prompts_decode_the_stateful_graphs_tokens(pair) -> None:
    paged, stateful, prompts = pair
    assert paged.paged_prefill_from == 512 and stateful.paged_prefill_from is None
    long = prompts["long"]
    assert np.allclose(paged.prefill(long), stateful.prefill(long), atol=1e-3)
    assert paged._paged is not None and paged.length == len(long)  # the paged graph did the prefill
    # the cache it handed over is what the decode steps read: 40 greedy tokens agree
    assert tokens(paged, long) == tokens(stateful, long)
    # a shorter long prompt after it reuses the blocks; a longer one grows them
    for ids in (long[:600], long + long[5:400]):
        assert tokens(paged, ids, 16) == tokens(stateful, ids, 16)
    assert paged._paged.blocks == -(-len(long + long[5:400]) // paged._paged.block)


def test_the_paged_graph_projects_the_last_position_only(pair) -> None:
    paged, _, prompts = pair
    paged.prefill(prompts["long"])
    assert tuple(paged._paged.request.get_output_tensor(0).shape) == (1, 1, paged.vocab_size)


def test_when_the_paged_prefill_stays_off() -> None:
    from chatlab.backends.export import export_model
    from chatlab.backends.openvino import OpenVINOBackend

    folder = export_model(MODEL, "int8")
    short = OpenVINOBackend(folder, precision="f32")
    short.prefill(list(range(1, 40)))
    assert short._paged is None  # a short prompt never compiles the paged graph
    # its cache is read as floats: a u8 cache keeps the stateful prefill; so does the full-logits mode
    assert OpenVINOBackend(folder, precision="f32", kv_cache_precision="u8").paged_prefill_from is None
    assert OpenVINOBackend(folder, precision="f32", slice_logits=False).paged_prefill_from is None
