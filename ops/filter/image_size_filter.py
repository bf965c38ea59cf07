import re
from typing import Literal

from djx import Batch, RangeFilter, RecipeError, register_op

# Data-Juicer's convention: KB and KiB alike are 1024 bytes (MB 1024**2, ...).
_UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4,
          "KIB": 1024, "MIB": 1024 ** 2, "GIB": 1024 ** 3, "TIB": 1024 ** 4}


def parse_size(text: str | int | None, key: str) -> int | None:
    """'6MB' -> 6291456, '1KiB' -> 1024, 500 -> 500, None (no bound) -> None."""
    if text is None or isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise RecipeError(f"{key}: expected a size like '500KB', '6MB' or '1GiB', got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


@register_op("image_size_filter")
class ImageSizeFilter(RangeFilter):
    """Keep samples whose image files' sizes (bytes on disk) are within [min_size, max_size]."""

    stats_keys = ("image_sizes",)
    stat_shapes = {"image_sizes": "per_image"}
    stat_ranges = {"image_sizes": (0, None)}
    uses_text = False
    uses_images = True

    def __init__(self, min_size: str | int = "0", max_size: str | int = "1TB",
                 any_or_all: Literal["any", "all"] = "any", **common):
        super().__init__(**common)
        self.size_text = (min_size, max_size)  # as given, for drop reasons
        self.min_bytes = parse_size(min_size, "min_size")
        self.max_bytes = parse_size(max_size, "max_size")
        self.any_or_all = any_or_all

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["image_sizes"] = [batch.images.file_bytes(ref) for ref in batch.image_refs(sample)]

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats["image_sizes"], self.min_bytes, self.max_bytes, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        shown = tuple(f"{given} ({n} bytes)" if isinstance(given, str) else str(n).lower()
                      for given, n in zip(self.size_text, (self.min_bytes, self.max_bytes)))
        return self.range_reason("image_sizes", stats["image_sizes"], self.min_bytes, self.max_bytes,
                            "min_size", "max_size", self.any_or_all, shown)
