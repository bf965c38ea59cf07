"""'Did you mean' suggestions for unknown names."""
import difflib


def closest(name: str, candidates, n: int = 1) -> str | list[str] | None:
    """The closest candidate (n=1) or the n closest, by similarity of spelling."""
    found = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)
    if n == 1:
        return found[0] if found else None
    return found
