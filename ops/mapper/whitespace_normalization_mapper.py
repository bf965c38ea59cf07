import re

from djx import register_op
from djx.ops.common.special_tokens import split_at_tokens
from djx.ops.common.text_mapper import TextMapper

# Data-Juicer's VARIOUS_WHITESPACES, as it is: tab and the Unicode spaces (and U+0084, U+FFFC, the
# zero-width characters), but not the newline, the carriage return nor U+0085
VARIOUS_WHITESPACES = frozenset(
    "\u0020\u0009\u00a0\u0084\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u200b\u200c\u200d\u202f\u205f\u2060\u3000\ufffc")
_SPACES = re.compile("[" + re.escape("".join(sorted(VARIOUS_WHITESPACES))) + "]")


@register_op("whitespace_normalization_mapper")
class WhitespaceNormalizationMapper(TextMapper):
    """Strip the text's ends, then turn tabs and Unicode spaces into plain spaces.

    The spaces are Data-Juicer's list: tab, no-break, the U+2000 block, zero-width, ideographic,
    U+0084 and U+FFFC; newlines and carriage returns stay."""

    def __init__(self, **common):
        super().__init__(**common)

    def map_text(self, text: str) -> str:
        return _SPACES.sub(" ", text)

    def map_sample_text(self, text: str, tokens: tuple[str, ...]) -> str:
        # the whole text's ends are stripped (only the first and last stretch, never a token)
        pieces = split_at_tokens(text, tokens)
        pieces[0] = pieces[0].lstrip()
        pieces[-1] = pieces[-1].rstrip()
        return super().map_sample_text("".join(pieces), tokens)
