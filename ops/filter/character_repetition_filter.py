from djx import register_op
from djx.ops.common.text_filter import TextStatFilter, check_positive
from djx.ops.common.text_words import char_rep_ratio


@register_op("character_repetition_filter")
class CharacterRepetitionFilter(TextStatFilter):
    """Keep samples whose character n-gram repetition is within [min_ratio, max_ratio]:
    `char_rep_ratio` = the share of all `rep_len`-character n-grams held by the floor(sqrt(distinct))
    most frequent repeated ones (0.0 for a text shorter than rep_len)."""

    stat = "char_rep_ratio"
    stat_range = (0, 1)

    def __init__(self, rep_len: int = 10, min_ratio: float = 0.0, max_ratio: float = 0.5, **common):
        super().__init__(**common)
        check_positive("rep_len", rep_len)
        self.rep_len, self.min_ratio, self.max_ratio = rep_len, min_ratio, max_ratio

    def value(self, text: str) -> float:
        return char_rep_ratio(text, self.rep_len)
