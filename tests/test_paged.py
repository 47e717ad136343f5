"""chatlab's loop on OpenVINO's paged-attention graph (chatlab.backends.paged, the default) vs
the stateful graph as exported (attention="sdpa"): the same tokens, and blocks that grow."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from chatlab.errors import UnknownNameError
from chatlab.generate import SamplingParams, generate

MODEL = "smollm2-135m-instruct"
pytestmark = pytest.mark.slow  # compiles the int8 export several times


def folder() -> Any:
    from chatlab.backends.export import export_model

    return export_model(MODEL, "int8")


@pytest.fixture(scope="module")
def pair() -> tuple[Any, Any, dict[str, list[int]]]:
    from chatlab.backends.openvino import open_backend
    from chatlab.lab.bench.runner import bench_prompts

    paged = open_backend(folder(), precision="f32")
    stateful = open_backend(folder(), precision="f32", attention="sdpa")
    return paged, stateful, bench_prompts(MODEL)


def tokens(backend: Any, ids: list[int], n: int = 40) -> list[int]:
    return list(generate(backend, ids, SamplingParams(max_new_tokens=n, ignore_eos=True)))[-1].token_ids


def test_paged_is_the_default_and_decodes_the_stateful_graphs_tokens(pair) -> None:
    from chatlab.backends.openvino import PagedBackend, StatefulBackend
    from chatlab.protocols import RollbackBackend, SnapshotBackend

    paged, stateful, prompts = pair
    assert isinstance(paged, PagedBackend) and paged.attention == "paged"
    assert isinstance(stateful, StatefulBackend) and stateful.attention == "sdpa"
    # only the paged graph rolls back and copies its cache out
    assert isinstance(paged, RollbackBackend) and isinstance(paged, SnapshotBackend)
    assert not isinstance(stateful, RollbackBackend) and not isinstance(stateful, SnapshotBackend)
    for shape in ("short", "long"):  # 42 and 1,029 prompt tokens
        ids = prompts[shape]
        assert np.allclose(paged.prefill(ids), stateful.prefill(ids), atol=1e-3), shape
        assert paged.length == len(ids)
        assert tokens(paged, ids) == tokens(stateful, ids), shape
    # a shorter prompt after a long one overwrites the blocks it needs, nothing more
    ids = prompts["long"][:600]
    assert tokens(paged, ids, 16) == tokens(stateful, ids, 16)


def test_blocks_grow_during_a_reply_and_keep_the_cache(monkeypatch) -> None:
    """With no headroom the blocks run out mid-reply several times; each growth copies the
    filled blocks over, so the tokens stay the stateful graph's."""
    import chatlab.backends.paged as paged_module
    from chatlab.backends.openvino import StatefulBackend, open_backend

    monkeypatch.setattr(paged_module, "GROW_TOKENS", 0)
    paged = open_backend(folder(), precision="f32")
    stateful = open_backend(folder(), precision="f32", attention="sdpa")
    ids = list(range(1000, 1040))  # 40 tokens: 2 blocks of 32
    paged.prefill(ids)
    assert paged.graph.blocks == -(-len(ids) // paged.graph.block)
    assert tokens(paged, ids, 120) == tokens(stateful, ids, 120)
    assert paged.graph.blocks * paged.graph.block >= len(ids) + 120 > 2 * paged.graph.block


def test_the_paged_graph_projects_the_last_position_only(pair) -> None:
    paged, _, prompts = pair
    paged.prefill(prompts["long"])
    assert tuple(paged.request.get_output_tensor(0).shape) == (1, 1, paged.vocab_size)


def test_a_u8_cache_reads_its_block_size_from_the_value_blocks() -> None:
    """With a u8 cache the key blocks carry per-channel scales as extra rows ([?, 3, 40, 64] on
    the CPU this was written on); the block size must still be the tokens per block."""
    from chatlab.backends.openvino import open_backend

    f32 = open_backend(folder(), precision="f32")
    u8 = open_backend(folder(), precision="f32", kv_cache_precision="u8")
    assert u8.graph.block == f32.graph.block
    assert u8.graph.ports[0].get_element_type().get_type_name() == "u8"
    counting = list(range(2000, 2030))
    assert tokens(u8, counting, 12) == tokens(f32, counting, 12)


def test_a_graph_without_paged_attention_falls_back_to_the_stateful_one(monkeypatch) -> None:
    import chatlab.backends.paged as paged_module
    from chatlab.backends.openvino import StatefulBackend, open_backend

    monkeypatch.setattr(paged_module, "cache_ports", lambda compiled: [])
    with pytest.warns(UserWarning, match='no attention for the paged rewrite.*attention="sdpa"'):
        backend = open_backend(folder(), precision="f32")
    assert isinstance(backend, StatefulBackend) and backend.attention == "sdpa"
    assert len(tokens(backend, list(range(1000, 1010)), 5)) == 5
    with pytest.raises(UnknownNameError, match="valid choices: paged, sdpa"):
        open_backend(folder(), precision="f32", attention="flash")


def test_the_verify_graph_gives_the_steps_rows_and_shares_the_cache(monkeypatch) -> None:
    """Passes of up to `width` tokens go to a second compiled graph, padded to its width: their
    rows are the one-token steps' rows, the length counts the real tokens only, and blocks that
    grow under both graphs keep the cache (a step after a verify pass reads its tokens)."""
    import chatlab.backends.paged as paged_module
    from chatlab.backends.openvino import StatefulBackend, open_backend

    monkeypatch.setattr(paged_module, "GROW_TOKENS", 0)
    plain = open_backend(folder(), precision="f32")
    fast = open_backend(folder(), precision="f32")
    assert fast.verify_width is None
    fast.prepare_verify(4)
    assert fast.verify_width == 4 and fast.graph.verify is not None
    ids = list(range(1000, 1030))  # 30 tokens: the first verify pass crosses into a new block
    plain.prefill(ids), fast.prefill(ids)
    steps = [plain.step(t).copy() for t in (11, 12, 13, 14, 15)]
    rows = fast.extend([11, 12], keep=2).copy()  # padded to 4
    assert fast.length == len(ids) + 2
    assert np.abs(rows - np.stack(steps[:2])).max() < 1e-3
    rows = fast.extend([13, 14, 15], keep=1).copy()
    assert np.abs(rows[0] - steps[4]).max() < 1e-3
    assert fast.graph.blocks * fast.graph.block >= len(ids) + 5 + 2  # room for the padding
    assert np.abs(fast.step(16) - plain.step(16)).max() < 1e-3  # the step graph sees both's cache
    fast.truncate(len(ids) + 3)  # drop 14, 15, 16: a verify pass writes over them
    plain.truncate(len(ids) + 3)
    again = np.stack([plain.step(20).copy(), plain.step(21).copy()])  # step returns a view: copy
    assert np.abs(fast.extend([20, 21], keep=2) - again).max() < 1e-3
    wide = fast.extend(list(range(40, 46)), keep=1)  # wider than the verify graph: the step graph
    assert fast.length == len(ids) + 11 and wide.shape == (1, fast.vocab_size)
    with pytest.raises(ValueError, match="at least 2"):
        fast.prepare_verify(1)
