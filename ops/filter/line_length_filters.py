"""The two line-length filters of Data-Juicer's text recipes (the Pile and RedPajama refine recipes).

Lines are Python's `str.splitlines()`, as Data-Juicer splits them: \\n, \\r\\n and \\r, but also the
vertical tab, form feed, the file/group/record separators (\\x1c-\\x1e), NEL (\\x85) and U+2028/U+2029.
A trailing line break starts no empty line; an empty text has no lines (both stats 0).
"""
import sys

from djx import register_op
from djx.ops.common.text_filter import TextStatFilter


class LineLengthFilter(TextStatFilter):
    low_name, high_name = "min_len", "max_len"

    def __init__(self, min_len: int = 10, max_len: int = sys.maxsize, **common):
        super().__init__(**common)
        self.min_len, self.max_len = min_len, max_len


@register_op("average_line_length_filter")
class AverageLineLengthFilter(LineLengthFilter):
    """Keep samples whose average line length is within [min_len, max_len].

    `avg_line_length` = the text's length (line breaks included) over its number of lines (0.0 for a
    text with no line)."""

    stat = "avg_line_length"

    def value(self, text: str) -> float:
        lines = text.splitlines()
        return len(text) / len(lines) if lines else 0.0


@register_op("maximum_line_length_filter")
class MaximumLineLengthFilter(LineLengthFilter):
    """Keep samples whose longest line is within [min_len, max_len] characters.

    `max_line_length` is 0 for a text with no line."""

    stat = "max_line_length"

    def value(self, text: str) -> int:
        return max(map(len, text.splitlines()), default=0)
