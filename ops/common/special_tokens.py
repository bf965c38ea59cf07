"""Text mappers never alter djx's special tokens.

A sample's text holds the image token (`<__dj__image>` by default) where an image goes and the
eoc token (`<|__dj__eoc|>`) where a chunk ends; the tokens in force are the run's (a recipe may
configure others) and travel in the RunContext, `batch.ctx`. A text function applied to the
whole text could change them (an HTML cleaner removes a token that looks like a tag, a link
cleaner eats a token glued to a URL), which would pair images with the wrong text. So a mapper
applies its function to each stretch of text between tokens and rejoins the stretches with the
tokens exactly as they were: the number and order of tokens never changes.

A mapper first gives its function the whole text with a placeholder for each token (so an HTML
parser sees one document, as Data-Juicer's op does) and puts the tokens back where the function
left the placeholders; where it did not leave each placeholder (a link pattern swallowed one),
the function is applied to each stretch between tokens instead. A match or an HTML element that
would take a token in is then cut at the token (see docs/ops.md, "Mappers and special tokens").
A mapping that would make a new token out of ordinary text raises TokenMade: the sample is
rejected rather than have its images paired with the wrong text.
"""
from __future__ import annotations

import functools
import re
from typing import Callable


def special_tokens(ctx) -> tuple[str, ...]:
    """The run's special tokens (image, eoc), from its RunContext; empty ones left out."""
    return tuple(t for t in (ctx.image_special_token, ctx.eoc_special_token) if t)


def split_at_tokens(text: str, tokens: tuple[str, ...]) -> list[str]:
    """`text` cut at the tokens: [stretch, token, stretch, token, ..., stretch] (stretches at even
    indexes, possibly empty). A longer token wins where one token contains another."""
    tokens = tuple(t for t in tokens if t)
    if not tokens or not any(t in text for t in tokens):
        return [text]
    return _splitter(tokens).split(text)


@functools.lru_cache(maxsize=64)
def _splitter(tokens: tuple[str, ...]) -> re.Pattern:
    return re.compile("(" + "|".join(re.escape(t) for t in sorted(set(tokens), key=len, reverse=True)) + ")")


def map_between_tokens(text: str, tokens: tuple[str, ...], fn: Callable[[str], str]) -> str:
    """`fn` applied to each stretch of `text` between special tokens, the tokens kept as they were.

    Raises TokenMade when the result holds tokens the text did not (a function that turns
    `〈__dj__image〉` into `<__dj__image>`, or text it joins into one): the sample's images would
    no longer pair with its tokens, so the caller rejects it rather than write that."""
    pieces = split_at_tokens(text, tokens)
    out = "".join(p if i % 2 else _checked(fn, p) for i, p in enumerate(pieces))
    after = split_at_tokens(out, tokens)[1::2]
    if after != pieces[1::2]:
        raise TokenMade(_made(pieces[1::2], after, tokens))
    return out


def map_keeping_tokens(text: str, tokens: tuple[str, ...], fn: Callable[[str], str]) -> str:
    """`fn` applied to the whole text with each token stood in for by a numbered placeholder (two
    private-use characters the text lacks around the token's index), the tokens put back where
    `fn` left their placeholders: `fn` sees the text in one piece, as Data-Juicer's op would (an
    HTML parser its whole document, whitespace between stretches). Where `fn` does not leave every
    placeholder once, in order (a link pattern that takes one in), `fn` is applied between the
    tokens instead (map_between_tokens). Raises TokenMade as that does."""
    pieces = split_at_tokens(text, tokens)
    if len(pieces) == 1:
        return map_between_tokens(text, tokens, fn)
    left, right = _free_pair(text)
    if right is None:
        return map_between_tokens(text, tokens, fn)
    marked = "".join(f"{left}{i // 2}{right}" if i % 2 else p for i, p in enumerate(pieces))
    out = _checked(fn, marked)
    parts = re.split(f"{left}([0-9]+){right}", out)
    if (parts[1::2] != [str(i) for i in range(len(pieces) // 2)]
            or any(left in p or right in p for p in parts[::2])):
        return map_between_tokens(text, tokens, fn)
    joined = "".join(pieces[int(p) * 2 + 1] if i % 2 else p for i, p in enumerate(parts))
    after = split_at_tokens(joined, tokens)[1::2]
    if after != pieces[1::2]:
        raise TokenMade(_made(pieces[1::2], after, tokens))
    return joined


def delete_keeping_tokens(text: str, tokens: tuple[str, ...],
                          spans_of: Callable[[str], list[tuple[int, int]]]) -> str:
    """`text` less the ordinary characters of the spans `spans_of` finds in it, every special token
    kept where it stands: `spans_of` sees the text with a placeholder for each token (as
    map_keeping_tokens gives it), so a token is one opaque piece of the text to it, and a span
    that takes a token in loses its text around the token, never the token. For the mappers that
    cut text away (a LaTeX preamble, comments, a bibliography). Raises TokenMade as
    map_between_tokens does."""
    pieces = split_at_tokens(text, tokens)
    left, right = _free_pair(text) if len(pieces) > 1 else (None, None)
    if right is None:  # no token, or no free placeholder: the tokens are found as they are written
        marked, kept = text, [m.span() for m in _tokens_in(text, tokens)]
    else:
        marked = "".join(f"{left}{i // 2}{right}" if i % 2 else p for i, p in enumerate(pieces))
        kept = [m.span() for m in re.finditer(f"{left}[0-9]+{right}", marked)]
    out, at, k = [], 0, 0
    for start, end in sorted(spans_of(marked)):
        start = max(start, at)
        out.append(marked[at:start])
        while k < len(kept) and kept[k][1] <= start:  # the tokens before this span
            k += 1
        j = k
        while j < len(kept) and kept[j][0] < end:  # the tokens in it
            out.append(marked[max(kept[j][0], start):min(kept[j][1], end)])
            j += 1
        at = max(at, end)
    out = "".join(out) + marked[at:]
    if right is not None:
        out = re.sub(f"{left}([0-9]+){right}", lambda m: pieces[int(m.group(1)) * 2 + 1], out)
    after = split_at_tokens(out, tokens)[1::2]
    if after != pieces[1::2]:
        raise TokenMade(_made(pieces[1::2], after, tokens))
    return out


def _free_pair(text: str) -> tuple[str | None, str | None]:
    """Two private-use characters `text` lacks (None where it holds nearly all of them)."""
    free = (chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)
    return next(free, None), next(free, None)


def _tokens_in(text: str, tokens: tuple[str, ...]):
    tokens = tuple(t for t in tokens if t)
    return _splitter(tokens).finditer(text) if tokens else iter(())


class TokenMade(ValueError):
    """A text function made a special token out of ordinary text."""


def _made(before: list[str], after: list[str], tokens: tuple[str, ...]) -> str:
    counts = ", ".join(f"{t!r} {before.count(t)} -> {after.count(t)}" for t in tokens if before.count(t) != after.count(t))
    return (f"mapping would make special tokens out of ordinary text ({counts or 'their order changes'}), "
            f"so the images would no longer pair with the text; the text is left for a person to look at")


def _checked(fn: Callable[[str], str], stretch: str) -> str:
    out = fn(stretch)
    if not isinstance(out, str):
        raise TypeError(f"a text function returned {type(out).__name__}, not a string")
    return out
