from typing import Literal

from djx import Batch, register_op
from djx.ops.common.faces import HaarFaceFilter


@register_op("image_face_ratio_filter")
class ImageFaceRatioFilter(HaarFaceFilter):
    """Keep samples whose images' largest face covers min_ratio to max_ratio of the image.

    The ratio is the largest face box's area over the image's (0 without a face); faces are found
    as image_face_count_filter finds them; any_or_all over the sample's images."""

    stats_keys = ("face_ratios",)
    stat_shapes = {"face_ratios": "per_image"}
    stat_ranges = {"face_ratios": (0, 1)}

    def __init__(self, cv_classifier: str = "", min_ratio: float = 0.0, max_ratio: float = 0.4,
                 any_or_all: Literal["any", "all"] = "any", scaleFactor: float = 1.1,  # noqa: N803
                 minNeighbors: int = 3, minSize: list[int] | None = None,  # noqa: N803
                 maxSize: list[int] | None = None, **common):  # noqa: N803
        super().__init__(**common)
        self.min_ratio, self.max_ratio = min_ratio, max_ratio
        self.any_or_all = any_or_all
        self._init_detector(cv_classifier, scaleFactor, minNeighbors, minSize, maxSize)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["face_ratios"] = [
            max((w * h for _, _, w, h in boxes), default=0) / (image.width * image.height)
            for image, boxes in self.faces_per_image(sample, batch)]

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats["face_ratios"], self.min_ratio, self.max_ratio, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("face_ratios", stats["face_ratios"], self.min_ratio, self.max_ratio,
                            "min_ratio", "max_ratio", self.any_or_all)
