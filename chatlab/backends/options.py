"""The model and backend flags that `chatlab complete` and `chatlab serve` share."""
from __future__ import annotations

import argparse


def add_model_args(p: argparse.ArgumentParser, genai: bool = False) -> None:
    """--model, --template, --backend, --weight-format, --precision (and genai's --max-seqs)."""
    p.add_argument("--model", help="a store name, model folder or hub id "
                   "(default: $CHATLAB_MODEL, else smollm2-135m-instruct)")
    p.add_argument("--template", help="a template name or file (default: the resolution chain)")
    more = ", or genai (openvino-genai continuous batching: several requests at once)" if genai else " or torch"
    p.add_argument("--backend", default="openvino",
                   help=f"openvino (default: int8 weights at f32, exported on first use){more}")
    p.add_argument("--weight-format", default=None,
                   help="fp32, int8 or int4 (default: int8 on openvino and genai, fp32 on torch)")
    p.add_argument("--precision", default="f32",
                   help="arithmetic: f32 (default; exact) or bf16 (faster on CPUs with bf16, drifts)")
    if genai:
        p.add_argument("--max-seqs", type=int, default=8,
                       help="genai: sequences generated at once (requests beyond wait in the queue)")
