"""The model and backend flags that `chatlab complete` and `chatlab serve` share; the backend
flags come from the registry (chatlab.backends.registry), one per backend option."""
from __future__ import annotations

import argparse

from chatlab.backends.registry import add_backend_args


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--model, --template, and the registry's --backend, --weight-format, --precision and options."""
    p.add_argument("--model", help="a store name, model folder or hub id "
                   "(default: $CHATLAB_MODEL, else smollm2-135m-instruct)")
    p.add_argument("--template", help="a template name or file (default: the resolution chain)")
    add_backend_args(p)
