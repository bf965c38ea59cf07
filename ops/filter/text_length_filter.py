import sys

from djx import Batch, RangeFilter, register_op


@register_op("text_length_filter")
class TextLengthFilter(RangeFilter):
    """Keep samples whose text length (characters) is within [min_len, max_len]."""

    stats_keys = ("text_len",)
    stat_shapes = {"text_len": "scalar"}
    stat_ranges = {"text_len": (0, None)}

    def __init__(self, min_len: int = 10, max_len: int = sys.maxsize, **common):
        super().__init__(**common)
        self.min_len = min_len
        self.max_len = max_len

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["text_len"] = len(batch.text(sample))

    def keep(self, stats: dict) -> bool:
        return self.in_range(stats["text_len"], self.min_len, self.max_len)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("text_len", stats["text_len"], self.min_len, self.max_len, "min_len", "max_len")
