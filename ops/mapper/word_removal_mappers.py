"""The two word-removing mappers of Data-Juicer's BLOOM (OSCAR) recipe.

Both read the text as Data-Juicer does: lines (split on newline), each split on tabs, each of those
on spaces (empty pieces dropped); the words kept are joined back the same way, and a line or tab
stretch left with no word disappears with its separator.
"""
from __future__ import annotations

import sys

from djx import register_op
from djx.ops.common.sp_words import SentencePieceWords
from djx.ops.common.text_mapper import TextMapper
from djx.ops.common.text_words import special_characters, strip_special


def keep_words(text: str, keep) -> str:
    """`text` with only the words `keep(word)` accepts, split and joined as Data-Juicer does."""
    lines = [[[w for w in stretch.split(" ") if w and keep(w)] for stretch in line.split("\t")]
             for line in text.split("\n")]
    lines = ["\t".join(" ".join(words) for words in line if words) for line in lines]
    return "\n".join(line for line in lines if line)


@register_op("remove_long_words_mapper")
class RemoveLongWordsMapper(TextMapper):
    """Remove the words whose length is outside [min_len, max_len].

    A word too long is kept (whole) when it fits once stripped of special characters at its ends."""

    def __init__(self, min_len: int = 1, max_len: int = sys.maxsize, **common):
        super().__init__(**common)
        self.min_len, self.max_len = min_len, max_len

    def fits(self, word: str) -> bool:
        if self.min_len <= len(word) <= self.max_len:
            return True
        return len(word) > self.max_len and \
            self.min_len <= len(strip_special(word, special_characters())) <= self.max_len

    def map_text(self, text: str) -> str:
        return keep_words(text, self.fits)


@register_op("remove_words_with_incorrect_substrings_mapper")
class RemoveWordsWithIncorrectSubstringsMapper(SentencePieceWords, TextMapper):
    """Remove the words that contain any of `substrings` (default: http, www, .com, href, //).

    A word is tested once stripped of special characters at its ends. With `tokenization`, the words
    are the pieces of the SentencePiece model at `tokenizer_model` (unset: Data-Juicer's
    {lang}.sp.model where its cache has it) and, as in Data-Juicer, a text that loses a piece is
    joined back without spaces."""

    def __init__(self, lang: str = "en", tokenization: bool = False, substrings: list[str] | None = None,
                 tokenizer_model: str | None = None, **common):
        super().__init__(**common)
        self.lang, self.tokenization, self.tokenizer_model = lang, tokenization, tokenizer_model
        self.substrings = ["http", "www", ".com", "href", "//"] if substrings is None else list(substrings)
        self.tokenizer = None

    def clean(self, word: str) -> bool:
        word = strip_special(word, special_characters())
        return not any(s in word for s in self.substrings)

    def map_text(self, text: str) -> str:
        if not self.tokenization:
            return keep_words(text, self.clean)
        self.load_resources()
        pieces = [p.replace("\u2581", "") for p in self.tokenizer.encode_as_pieces(text)]
        kept = [p for p in pieces if self.clean(p)]
        return "".join(kept) if len(kept) != len(pieces) else text
