"""The `chatlab complete` path, shared with the server: request → render → generate → parse."""
from chatlab.engine.engine import ChatEngine, load_engine
from chatlab.engine.request import ChatRequest, CompletionRequest, parse_request

__all__ = ["ChatEngine", "ChatRequest", "CompletionRequest", "load_engine", "parse_request"]
