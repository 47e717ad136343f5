"""One sequence on OpenVINO's paged-attention graph: the KV cache is an input chatlab owns, in blocks
grown as a reply needs, so a step keeps the last one's shapes (the stateful graph's mask grows)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from chatlab._thirdparty import Jsonable, OVCompiled, OVModel, OVPort, OVRequest, OVTensor

GROW_TOKENS = 256  # headroom past the prompt, so a reply rarely grows the blocks


def slice_last_position(model: OVModel, axis: int = 1, start: OVPort = None) -> bool:
    """Make `logits` cover the last position only (`start`, a graph output holding a negative
    index: that many last positions). False when the graph is not the expected one."""
    import openvino.opset13 as ops

    node = model.output("logits").get_node().input_value(0).get_node()
    while node.get_type_name() == "Convert":  # f16/f32 converts may sit after the projection
        node = node.input_value(0).get_node()
    if node.get_type_name() != "MatMul":
        return False
    hidden = node.input_value(0)  # [batch, seq, hidden]
    first = np.array([-1], np.int64) if start is None else start
    last = ops.slice(hidden, first, np.array([np.iinfo(np.int64).max], np.int64),
                     np.array([1], np.int64), np.array([axis], np.int64))
    node.input(0).replace_source_output(last.output(0))
    model.validate_nodes_and_infer_types()
    return True


def cache_ports(compiled: OVCompiled) -> list[OVPort]:
    return [p for p in compiled.inputs if p.get_any_name().startswith(("key_cache.", "value_cache."))]


class PagedGraph:
    """The paged rewrite of `folder`'s graph, compiled with `config`, holding one sequence."""

    def __init__(self, folder: Path, config: dict[str, Jsonable], slice_logits: bool = True) -> None:
        self.folder, self.config, self.slice_logits = folder, config, slice_logits
        self.compiled, self.sliced = self._compile()
        self.ports = cache_ports(self.compiled)
        if not self.ports:
            raise ValueError(f"{folder}: no attention for the paged rewrite to replace")
        # tokens per block from a value block (a u8 key block holds extra rows of scales)
        value = next(p for p in self.ports if p.get_any_name().startswith("value_cache."))
        self.block = value.get_partial_shape()[2].get_length()
        self.vocab_size = int(self.compiled.output(0).get_partial_shape()[-1].get_length())
        self.request = self.compiled.create_infer_request()
        self.verify: OVRequest | None = None
        self.verify_width = 0
        self.caches: dict[str, OVTensor] = {}
        self.blocks = 0  # allocated
        self.length = 0  # tokens cached
        # a decode step's inputs, preallocated: it writes a few numbers into them
        self._id, self._pos = np.zeros(1, np.int64), np.zeros(1, np.int64)
        self._past, self._begins = np.zeros(1, np.int32), np.array([0, 1], np.int32)
        self._table_begins, self._context = np.zeros(2, np.int32), np.zeros((), np.int32)
        self._table = np.zeros(0, np.int32)
        self._keep = np.array([-1], np.int64)
        self._bound = -1  # blocks in the block table bound for decoding; -1: nothing bound

    def _compile(self) -> tuple[OVCompiled, bool]:
        import openvino as ov
        from openvino._offline_transformations import paged_attention_transformation

        core = ov.Core()
        model = core.read_model(self.folder / "openvino_model.xml")
        paged_attention_transformation(model)
        # the slice keeps the last `-logits_keep` positions (more for a verify pass)
        keep = ov.opset13.parameter([1], ov.Type.i64, name="logits_keep")
        keep.output(0).get_tensor().set_names({"logits_keep"})
        model.add_parameters([keep])  # before the slice: validating it needs the input declared
        sliced = self.slice_logits and slice_last_position(model, axis=0, start=keep.output(0))
        if not sliced:  # every position is projected; nothing reads logits_keep
            model.remove_parameter(keep)
        return core.compile_model(model, "CPU", self.config), sliced

    def add_verify(self, width: int) -> None:
        """A second compile, sharing the blocks, for verify passes of exactly `width` tokens."""
        if width == self.verify_width:
            return
        if width < 2:
            raise ValueError(f"a verify graph needs a width of at least 2 tokens, not {width}")
        compiled, _ = self._compile()
        self.verify, self.verify_width = compiled.create_infer_request(), width
        for name, tensor in self.caches.items():
            self.verify.set_tensor(name, tensor)

    def _ensure(self, tokens: int) -> None:
        """Blocks for at least `tokens` tokens; growing keeps the blocks already filled."""
        import openvino as ov

        need = -(-tokens // self.block)
        if need <= self.blocks:
            return
        blocks = max(need + -(-GROW_TOKENS // self.block), 2 * self.blocks)
        for port in self.ports:
            name = port.get_any_name()
            shape = [blocks] + [d.get_length() for d in list(port.get_partial_shape())[1:]]
            grown = ov.Tensor(port.get_element_type(), shape)
            if name in self.caches and self.length:
                used = -(-self.length // self.block)
                grown.data[:used] = self.caches[name].data[:used]
            self.caches[name] = grown
            self.request.set_tensor(name, grown)
            if self.verify is not None:
                self.verify.set_tensor(name, grown)
        self.blocks = blocks
        self._table = np.arange(blocks, dtype=np.int32)
        self._bound = min(self._bound, 0)  # a new table array: bind its slice again

    def _rows(self, request: OVRequest) -> np.ndarray:
        return request.get_output_tensor(0).data.reshape(-1, self.vocab_size)  # a view

    def reset(self) -> None:
        self.length = 0  # the blocks are simply overwritten by the next prompt

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        """Feed `ids` after the cached tokens in one pass; the logits of the last `keep` (a view)."""
        n, past = len(ids), self.length
        if not ids or not 1 <= keep <= n:
            raise ValueError(f"extend needs tokens and 1 <= keep <= {n}")
        if self.verify is not None and n <= self.verify_width:
            return self._verify(ids, keep)
        total = past + n
        self._ensure(total)
        self.request.infer(self._inputs(ids, past, keep), share_inputs=True)
        self._bound = -1  # the request now holds this call's arrays, not the decode step's
        self.length = total
        return self._rows(self.request)[-keep:]

    def _inputs(self, ids: list[int], past: int, keep: int) -> dict[str, np.ndarray]:
        total = past + len(ids)
        used = -(-total // self.block)
        self._table_begins[1], self._context[()] = used, total
        inputs: dict[str, np.ndarray] = {
            "input_ids": np.asarray(ids, np.int64), "position_ids": np.arange(past, total, dtype=np.int64),
            "past_lens": np.array([past], np.int32), "subsequence_begins": np.array([0, len(ids)], np.int32),
            "block_indices": self._table[:used], "block_indices_begins": self._table_begins,
            "max_context_len": self._context}
        if self.sliced:
            inputs["logits_keep"] = np.array([-keep], np.int64)
        return inputs

    def _verify(self, ids: list[int], keep: int) -> np.ndarray:
        """A pass on the verify graph, `ids` padded to its width (causal: the padding changes
        no real row, and its cache entries lie past `length`)."""
        assert self.verify is not None
        n, width, past = len(ids), self.verify_width, self.length
        self._ensure(past + width)
        padded = list(ids) + [ids[-1]] * (width - n)
        self.verify.infer(self._inputs(padded, past, width), share_inputs=True)
        self.length = past + n
        return self._rows(self.verify)[n - keep:n]

    def snapshot(self) -> tuple[dict[str, np.ndarray], int]:
        """A copy of the filled blocks (for chatlab.engine.lease's LRU) and its size in bytes."""
        used = -(-self.length // self.block)
        copy = {name: tensor.data[:used].copy() for name, tensor in self.caches.items()}
        return copy, sum(a.nbytes for a in copy.values())

    def restore(self, snap: dict[str, np.ndarray], length: int) -> None:
        self.length = 0  # nothing of the current sequence is kept: no copy when growing
        self._ensure(length)
        for name, blocks in snap.items():
            self.caches[name].data[:len(blocks)] = blocks
        self.length = length

    def truncate(self, length: int) -> None:
        """Forget the tokens past `length`: the next call writes over them."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        self.length = length

    def step(self, token_id: int) -> np.ndarray:
        """One token, its inputs bound once per prefill and then only written to."""
        import openvino as ov

        total = self.length + 1
        self._ensure(total)
        used = -(-total // self.block)
        if self._bound < 0:
            bound = [("input_ids", self._id), ("position_ids", self._pos), ("past_lens", self._past),
                     ("subsequence_begins", self._begins), ("block_indices_begins", self._table_begins),
                     ("max_context_len", self._context)]
            if self.sliced:
                bound.append(("logits_keep", self._keep))
            for name, array in bound:
                self.request.set_tensor(name, ov.Tensor(array, shared_memory=True))
        if used != self._bound:
            self.request.set_tensor("block_indices", ov.Tensor(self._table[:used], shared_memory=True))
            self._bound = used
        self._id[0], self._pos[0], self._past[0] = token_id, self.length, self.length
        self._table_begins[1], self._context[()] = used, total
        self.request.infer()
        self.length = total
        return self._rows(self.request)[-1]
