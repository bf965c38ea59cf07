"""Shingles of a text as Data-Juicer 1.6.1's MinHash and SimHash deduplicators make them: the text
(lower-cased, `ignore_pattern` removed) cut by `tokenization` into space-separated words, pieces
between punctuation, characters, or SentencePiece pieces, then every run of `window_size` of them,
UTF-8 encoded (an empty list when the text has fewer)."""
from __future__ import annotations

from djx import RecipeError
from djx.ops.common.text_words import TEXT_EXTRA

TOKENIZATIONS = ("space", "punctuation", "character", "sentencepiece")


def compile_pattern(pattern: str | None, op: str):
    """Data-Juicer compiles patterns with the `regex` package (\\p{...} classes); None stays None."""
    if not pattern:
        return None
    try:
        import regex
    except ImportError:
        raise RecipeError(f"{op}: ignore_pattern needs the Python package 'regex': {TEXT_EXTRA}") from None
    try:
        return regex.compile(pattern)
    except regex.error as e:
        raise RecipeError(f"{op}.ignore_pattern: not a valid regular expression ({e}): {pattern!r}") from None


def punctuation_pattern(op: str):
    try:
        import regex
    except ImportError:
        raise RecipeError(f"{op}: tokenization 'punctuation' needs the Python package 'regex': {TEXT_EXTRA}") from None
    return regex.compile(r"\p{P}")


def shingles(text: str, tokenization: str, window: int, lowercase: bool, ignore=None, punctuation=None,
             tokenizer=None) -> list[bytes]:
    """Every shingle in text order (repeats included: SimHash counts them, MinHash takes the set)."""
    if lowercase:
        text = text.lower()
    if ignore is not None:
        text = ignore.sub("", text)
    if tokenization == "character":
        return [text[i:i + window].encode() for i in range(len(text) - window + 1)]
    if tokenization == "space":
        try:  # UTF-8 holds no space byte inside a character: the same words, encoded once
            words = [w for w in text.encode().split(b" ") if w]
            return [b" ".join(words[i:i + window]) for i in range(len(words) - window + 1)]
        except UnicodeEncodeError:
            pass  # a lone surrogate: below, only a shingle that holds it fails to encode
    if tokenization == "punctuation":
        tokens, join = punctuation.split(text), " "
    elif tokenization == "space":
        tokens, join = [w for w in text.split(" ") if w], " "
    else:  # sentencepiece
        tokens, join = tokenizer.encode(text, out_type=str), ""
    return [join.join(tokens[i:i + window]).encode() for i in range(len(tokens) - window + 1)]
