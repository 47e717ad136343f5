"""chatlab: serve open LLMs as chat, correctly. render -> generate -> parse -> serve."""
from chatlab.data import data_path
from chatlab.errors import ChatlabError

__all__ = ["ChatlabError", "data_path"]
__version__ = "0.1.0"
