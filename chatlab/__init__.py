"""chatlab: serve open LLMs as chat, correctly. render -> generate -> parse -> serve."""
from chatlab.errors import ChatlabError

__all__ = ["ChatlabError"]
__version__ = "0.1.0"
