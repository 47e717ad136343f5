"""Long prompts prefilled on OpenVINO's paged-attention graph, then decoded on the stateful one.

Profiled on a 2-core AVX2 CPU (OpenVINO's PERF_COUNT), a 1,029-token prefill of SmolLM2 int8 on
the stateful graph spends ~40% of its time in ScaledDotProductAttention: ~1.5 s of 3.7. The same
graph rewritten for paged attention (`paged_attention_transformation`, what openvino-genai runs)
spends ~0.34 s in its PagedAttention nodes for the same prompt, and the matrix products cost the
same on both. For decoding one token at a time the stateful graph is the faster of the two
(measured in session 3: the paged graph decoded at 0.77x), so chatlab uses each where it wins:

1. the prompt goes through the paged graph, one sequence, its cache in blocks of tokens
   (`key_cache.N` / `value_cache.N`: [blocks, kv_heads, block, head_size]; the plugin picks the
   block size, 32 on the CPU this was written on, read from the compiled graph's ports);
2. the blocks are laid end to end and written into the stateful request's state variables
   ([1, kv_heads, tokens, head_size]; ~30 ms for 1,000 tokens);
3. decode steps run on the stateful request as if it had done the prefill itself.

Step 2 reads the cache as plain floats, so this runs only with an f32 KV cache (the default at
f32). The paged graph is compiled on the first long prompt, not at load, and its blocks grow
with the longest prompt seen: short chats never pay for it.

One subtlety: in the paged graph the token axis is the batch axis ([tokens, 1, hidden] before
the output projection), so the "last position only" slice goes on axis 0, not axis 1 as in the
stateful graph; sliced on the wrong axis it silently projects every position (202 MB of logits).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

class PagedPrefill:
    """The paged graph of `folder`, compiled with `config`, prefilling one sequence at a time."""

    def __init__(self, folder: Path, config: dict[str, Any]) -> None:
        import openvino as ov
        from openvino._offline_transformations import paged_attention_transformation

        from chatlab.backends.openvino import slice_last_position

        core = ov.Core()
        model = core.read_model(folder / "openvino_model.xml")
        paged_attention_transformation(model)
        slice_last_position(model, axis=0)  # tokens are axis 0 here (see above)
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.ports = [p for p in self.compiled.inputs if p.get_any_name().startswith(("key_cache.", "value_cache."))]
        self.block = self.ports[0].get_partial_shape()[2].get_length()  # tokens per block
        self.caches: dict[str, Any] = {}
        self.blocks = 0

    def _ensure(self, blocks: int) -> None:
        """Cache tensors of at least `blocks` blocks (what the prompt needs; they only grow)."""
        import openvino as ov

        if blocks <= self.blocks:
            return
        for port in self.ports:
            shape = [blocks] + [d.get_length() for d in list(port.get_partial_shape())[1:]]
            self.caches[port.get_any_name()] = ov.Tensor(port.get_element_type(), shape)
            self.request.set_tensor(port.get_any_name(), self.caches[port.get_any_name()])
        self.blocks = blocks

    def prefill(self, ids: list[int]) -> np.ndarray:
        """Logits of the last prompt position; the prompt's cache is left in the blocks."""
        n = len(ids)
        blocks = -(-n // self.block)
        self._ensure(blocks)
        self.request.infer({
            "input_ids": np.asarray(ids, np.int64), "position_ids": np.arange(n, dtype=np.int64),
            "past_lens": np.array([0], np.int32), "subsequence_begins": np.array([0, n], np.int32),
            "block_indices": np.arange(blocks, dtype=np.int32),
            "block_indices_begins": np.array([0, blocks], np.int32),
            "max_context_len": np.array(n, np.int32)}, share_inputs=True)
        return self.request.get_output_tensor(0).data.reshape(-1)

    def hand_over(self, request: Any, n: int) -> None:
        """Write the first `n` positions of the cache into the stateful `request`'s variables
        (named `past_key_values.<layer>.key...` / `...value` by optimum's export)."""
        import openvino as ov

        blocks = -(-n // self.block)
        for state in request.query_state():
            layer = int(state.name.split(".")[1])
            kind = "key" if state.name.endswith("key") else "value"
            cache = self.caches[f"{kind}_cache.{layer}"].data[:blocks]  # [blocks, heads, block, size]
            heads, size = cache.shape[1], cache.shape[3]
            laid = cache.transpose(1, 0, 2, 3).reshape(heads, blocks * self.block, size)[:, :n]
            state.state = ov.Tensor(np.ascontiguousarray(laid[None]))
