"""One exception family for everything a user can get wrong: every ChatlabError names the problem
and the fix; the CLI prints it without a traceback and the server turns it into an OpenAI error."""
from __future__ import annotations


class ChatlabError(Exception):
    """A user-facing error: bad input, a missing asset, an unreachable hub. `param` names the
    request field to blame (`messages[0].role`), None when no one field is."""

    exit_code = 2
    code: str | None = None  # OpenAI's error `code` for this kind of error, when it has one

    def __init__(self, message: str = "", param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ContextLengthError(ChatlabError):
    """The prompt (with the tokens asked for) does not fit the model's context window."""

    code = "context_length_exceeded"  # what OpenAI sends, and clients such as langchain look for


class UnknownNameError(ChatlabError, KeyError):
    """A name (model, template, backend, ...) that is not one of the valid choices."""

    def __init__(self, kind: str, name: str, choices: list[str], param: str | None = None) -> None:
        self.kind, self.name, self.choices = kind, name, list(choices)
        super().__init__(f"unknown {kind} {name!r}; valid choices: {', '.join(self.choices)}", param=param)

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0])


class AssetError(ChatlabError):
    """An offline asset is missing, corrupted or truncated."""


class HubUnavailableError(ChatlabError):
    """A Hugging Face hub id was asked for while the hub cannot be reached."""


class CannotExpress(ChatlabError):
    """A template construct the target format cannot write: not bad input, so exit 3, not 2."""

    exit_code = 3

    def __init__(self, message: str, construct: str, target: str) -> None:
        super().__init__(message)
        self.construct, self.target = construct, target


class MissingSpecialToken(ChatlabError):
    """The template names a special token the tokenizer does not have (nothing can be certified)."""

    def __init__(self, message: str, token: str) -> None:
        super().__init__(message)
        self.token = token
