"""Errors a user can hit. Each message says what to change (with `closest`: "did you mean")."""
import difflib


class DjxError(Exception):
    """Base of every error djx raises on purpose; the CLI prints it without a traceback."""


class UsageError(DjxError, TypeError):
    """The Python API called with something it cannot take (a class for an instance, positional
    op parameters, a non-op in ops=...); also a TypeError, which is what it is in Python."""


class RecipeError(DjxError):
    """The recipe (or an op's parameters) is invalid. `items`: its problems one by one, when it has
    several (a recipe's loader lists each on its own line)."""

    def __init__(self, message: str = "", items: list[str] | None = None):
        super().__init__(message)
        self.items = list(items) if items else [message]


class OpNotFoundError(RecipeError):
    """A recipe names an op that is not registered."""


class SampleError(DjxError):
    """One sample cannot be processed; it is rejected with this message as its reason, and
    `code` (e.g. "bad_image") as its rejection code."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class CheckError(DjxError):
    """An output failed the stats-completeness or accounting check."""


class ResumeError(DjxError):
    """A previous run's state does not match this run (recipe or input changed)."""


def closest(name: str, candidates, n: int = 1) -> str | list[str] | None:
    """The closest candidate (n=1) or the n closest, by similarity of spelling."""
    found = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.7)  # a misspelling, not a look-alike
    if n == 1:
        return found[0] if found else None
    return found
