import sys
from typing import Literal

from djx import Batch, RangeFilter, register_op
from djx.ops.filter.per_image import image_sizes


@register_op("image_shape_filter")
class ImageShapeFilter(RangeFilter):
    """Keep samples whose images' width and height are within the given ranges (header-only read)."""

    stats_keys = ("image_width", "image_height")
    stat_shapes = {"image_width": "per_image", "image_height": "per_image"}
    stat_ranges = {"image_width": (0, None), "image_height": (0, None)}
    uses_text = False
    uses_images = True

    def __init__(self, min_width: int = 1, max_width: int = sys.maxsize, min_height: int = 1,
                 max_height: int = sys.maxsize, any_or_all: Literal["any", "all"] = "any", **common):
        super().__init__(**common)
        self.min_width, self.max_width = min_width, max_width
        self.min_height, self.max_height = min_height, max_height
        self.any_or_all = any_or_all

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        sizes = image_sizes(sample, batch)
        stats = batch.stats(sample)
        stats["image_width"] = [w for w, _ in sizes]
        stats["image_height"] = [h for _, h in sizes]

    def keep(self, stats: dict) -> bool:
        ws, hs = stats["image_width"], stats["image_height"]
        if not ws:
            return True
        oks = [self.in_range(w, self.min_width, self.max_width) and self.in_range(h, self.min_height, self.max_height)
               for w, h in zip(ws, hs)]
        return any(oks) if self.any_or_all == "any" else all(oks)

    def drop_reason(self, stats: dict) -> str:
        ws, hs = stats["image_width"], stats["image_height"]
        out = [self.range_reason(stat, values, low, high, f"min_{side}", f"max_{side}", self.any_or_all)
               for stat, values, low, high, side in (("image_width", ws, self.min_width, self.max_width, "width"),
                                                     ("image_height", hs, self.min_height, self.max_height, "height"))
               if any(not self.in_range(v, low, high) for v in values)]
        return "; ".join(out)

