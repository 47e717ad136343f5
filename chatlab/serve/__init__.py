"""The OpenAI-compatible server: routes (app), the queue in front of the model, a notebook's start."""
from chatlab.serve.background import ServerHandle, start_server

__all__ = ["ServerHandle", "start_server"]
