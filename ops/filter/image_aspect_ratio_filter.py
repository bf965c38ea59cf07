from typing import Literal

from djx import Batch, RangeFilter, register_op
from djx.ops.filter.per_image import image_sizes


@register_op("image_aspect_ratio_filter")
class ImageAspectRatioFilter(RangeFilter):
    """Keep samples whose images' aspect ratio (width / height) is within [min_ratio, max_ratio]."""

    stats_keys = ("aspect_ratios",)
    stat_shapes = {"aspect_ratios": "per_image"}
    stat_ranges = {"aspect_ratios": (0, None)}
    uses_text = False
    uses_images = True

    def __init__(self, min_ratio: float = 0.333, max_ratio: float = 3.0,
                 any_or_all: Literal["any", "all"] = "any", **common):
        super().__init__(**common)
        self.min_ratio, self.max_ratio = min_ratio, max_ratio
        self.any_or_all = any_or_all

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["aspect_ratios"] = [w / h for w, h in image_sizes(sample, batch)]

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats["aspect_ratios"], self.min_ratio, self.max_ratio, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("aspect_ratios", stats["aspect_ratios"], self.min_ratio, self.max_ratio,
                            "min_ratio", "max_ratio", self.any_or_all)
