from djx import register_op
from djx.ops.common.text_filter import TextStatFilter
from djx.ops.common.text_words import special_characters


@register_op("special_characters_filter")
class SpecialCharactersFilter(TextStatFilter):
    """Keep samples whose share of special characters is within [min_ratio, max_ratio]:
    `special_char_ratio` = characters in Data-Juicer's SPECIAL_CHARACTERS (punctuation, digits,
    whitespace, common symbols, and the emoji of `emoji` 2.2.0, the release Data-Juicer pins, whatever
    release is installed) / characters (0.0 for empty text)."""

    stat = "special_char_ratio"
    stat_range = (0, 1)

    def __init__(self, min_ratio: float = 0.0, max_ratio: float = 0.25, **common):
        super().__init__(**common)
        self.min_ratio, self.max_ratio = min_ratio, max_ratio
        self.chars = special_characters()

    def value(self, text: str) -> float:
        chars = self.chars
        return sum(1 for c in text if c in chars) / len(text) if text else 0.0
