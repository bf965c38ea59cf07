import sys

from djx import Batch, Filter, range_reason, register_op


@register_op("text_length_filter")
class TextLengthFilter(Filter):
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
        return self.min_len <= stats["text_len"] <= self.max_len

    def drop_reason(self, stats: dict) -> str:
        return range_reason("text_len", stats["text_len"], self.min_len, self.max_len, "min_len", "max_len")
