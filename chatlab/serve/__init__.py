"""The OpenAI-compatible server: routes in app.py, queue.py in front of the model, and
background.py to start it inside a notebook."""
from chatlab.serve.background import ServerHandle, start_server

__all__ = ["ServerHandle", "start_server"]
