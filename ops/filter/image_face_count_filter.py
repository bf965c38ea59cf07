from typing import Literal

from djx import Batch, register_op
from djx.ops.common.faces import HaarFaceFilter


@register_op("image_face_count_filter")
class ImageFaceCountFilter(HaarFaceFilter):
    """Keep samples whose images hold min_face_count to max_face_count faces.

    Faces are what an OpenCV Haar cascade finds (cv_classifier, by default OpenCV 4's
    haarcascade_frontalface_alt.xml: the vision extra); any_or_all over the sample's images."""

    stats_keys = ("face_counts",)
    stat_shapes = {"face_counts": "per_image"}
    stat_ranges = {"face_counts": (0, None)}

    def __init__(self, cv_classifier: str = "", min_face_count: int = 1, max_face_count: int = 1,
                 any_or_all: Literal["any", "all"] = "any", scaleFactor: float = 1.1,  # noqa: N803
                 minNeighbors: int = 3, minSize: list[int] | None = None,  # noqa: N803
                 maxSize: list[int] | None = None, **common):  # noqa: N803
        super().__init__(**common)
        self.min_face_count, self.max_face_count = min_face_count, max_face_count
        self.any_or_all = any_or_all
        self._init_detector(cv_classifier, scaleFactor, minNeighbors, minSize, maxSize)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)["face_counts"] = [len(boxes) for _, boxes in self.faces_per_image(sample, batch)]

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats["face_counts"], self.min_face_count, self.max_face_count, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("face_counts", stats["face_counts"], self.min_face_count, self.max_face_count,
                            "min_face_count", "max_face_count", self.any_or_all)
