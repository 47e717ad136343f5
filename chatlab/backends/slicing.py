"""Graph surgery shared by the stateful and the paged OpenVINO graphs: the logits of the last
position only, by cutting the hidden states before the output projection."""
from __future__ import annotations

import numpy as np

from chatlab._thirdparty import OVModel, OVPort


def slice_last_position(model: OVModel, axis: int = 1, start: OVPort = None) -> bool:
    """Make the `logits` output cover the last position only; False when the graph is unknown.
    The positions are axis 1 of the stateful graph's [batch, seq, hidden]; the paged-attention
    graph has [tokens, 1, hidden] and is sliced on axis 0 (chatlab.backends.paged). `start`, a
    graph output holding a negative [1] index, keeps that many last positions instead (the
    paged graph's verify pass reads one row per drafted token)."""
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
