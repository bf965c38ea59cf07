"""A plug-in op loaded by file path: a recipe lists it as `custom_ops: [plugins/my_ops.py]`.

It counts the run's image special token in each text. The token is read from the RunContext the
op is handed, so a custom token set in the recipe must reach every worker, spawn included.
"""
from djx import Batch, Filter, register_op


@register_op("image_token_count_filter")
class ImageTokenCountFilter(Filter):
    """Keep samples whose text holds between min_count and max_count image special tokens."""

    stats_keys = ("image_token_count",)

    def __init__(self, min_count: int = 0, max_count: int = 1_000_000, **common):
        super().__init__(**common)
        self.min_count, self.max_count = min_count, max_count

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["image_token_count"] = batch.text(sample).count(batch.ctx.image_special_token)

    def keep(self, stats: dict) -> bool:
        return self.min_count <= stats["image_token_count"] <= self.max_count
