from typing import Literal

from djx import Batch, Filter, RecipeError, SampleError, register_op
from djx.ops.common.vision import REQUIRES
from djx.ops.common.subplot import SubplotParams, detect_subplot


@register_op("image_subplot_filter")
class ImageSubplotFilter(Filter):
    """Drop samples whose images look like a grid of subplots.

    Straight horizontal and vertical lines from a Hough transform give each image a confidence
    (Data-Juicer's detector, see djx.ops.common.subplot). An image
    counts as a subplot when its confidence is >= min_confidence and it has at least
    min_horizontal_lines and min_vertical_lines lines; `any` drops a sample when any image is one,
    `all` only when every image is."""

    stats_keys = ("image_subplot_confidence", "horizontal_peak_count", "vertical_peak_count",
                  "subplot_detected")
    stat_shapes = {"image_subplot_confidence": "per_image", "horizontal_peak_count": "per_image",
                   "vertical_peak_count": "per_image"}
    stat_ranges = {"image_subplot_confidence": (0, 1), "horizontal_peak_count": (0, None),
                   "vertical_peak_count": (0, None)}
    # min_horizontal_lines / min_vertical_lines enter the confidence and min_confidence makes
    # subplot_detected: only the strategy leaves the stats as they are
    verdict_params = ("any_or_all",)
    uses_text = False
    uses_images = True
    requires = REQUIRES

    def __init__(self, min_horizontal_lines: int = 3, min_vertical_lines: int = 3,
                 min_confidence: float = 0.5, any_or_all: Literal["any", "all"] = "any",
                 canny_threshold1: int = 70, canny_threshold2: int = 190, hough_threshold: int = 110,
                 min_line_length: int = 110, max_line_gap: int = 18, angle_tolerance: float = 4.0,
                 **common):
        super().__init__(**common)
        for name, value, low in (("min_horizontal_lines", min_horizontal_lines, 1),
                                 ("min_vertical_lines", min_vertical_lines, 1),
                                 ("hough_threshold", hough_threshold, 1),
                                 ("min_line_length", min_line_length, 0), ("max_line_gap", max_line_gap, 0)):
            if value < low:
                raise RecipeError(f"{name}: must be >= {low}, got {value}")
        self.min_confidence, self.any_or_all = min_confidence, any_or_all
        self.detector = SubplotParams(min_horizontal_lines, min_vertical_lines, canny_threshold1,
                                      canny_threshold2, hough_threshold, min_line_length, max_line_gap,
                                      angle_tolerance)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        import cv2
        found: dict[str, tuple[float, int, int]] = {}
        for ref in batch.image_refs(sample):
            if ref not in found:
                image = batch.images.rgb(ref)
                try:
                    found[ref] = detect_subplot(image, self.detector)
                except cv2.error as e:
                    raise SampleError(f"image {ref!r}: subplot detection failed: "
                                      f"{str(e).strip().splitlines()[-1]}") from None
        results = [found[ref] for ref in batch.image_refs(sample)]
        stats = batch.stats(sample)
        stats["image_subplot_confidence"] = [c for c, _, _ in results]
        stats["horizontal_peak_count"] = [h for _, h, _ in results]
        stats["vertical_peak_count"] = [v for _, _, v in results]
        stats["subplot_detected"] = max((c for c, _, _ in results), default=0.0) >= self.min_confidence

    def subplots(self, stats: dict) -> list[bool]:
        """Per image: a subplot (confidence and both line counts at their minimums)."""
        return [c >= self.min_confidence and h >= self.detector.min_horizontal_lines
                and v >= self.detector.min_vertical_lines
                for c, h, v in zip(stats["image_subplot_confidence"], stats["horizontal_peak_count"],
                                   stats["vertical_peak_count"])]

    def keep(self, stats: dict) -> bool:
        flags = self.subplots(stats)
        if not flags:
            return True
        return not (any(flags) if self.any_or_all == "any" else all(flags))

    def drop_reason(self, stats: dict) -> str:
        """Which images are subplots, with the stats and bounds that make each one."""
        d = self.detector
        flags = self.subplots(stats)
        each = [f"image {i + 1}: image_subplot_confidence={c:.4g} >= min_confidence {self.min_confidence:g}, "
                f"horizontal_peak_count={h} >= min_horizontal_lines {d.min_horizontal_lines}, "
                f"vertical_peak_count={v} >= min_vertical_lines {d.min_vertical_lines}"
                for i, (flag, c, h, v) in enumerate(zip(flags, stats["image_subplot_confidence"],
                                                        stats["horizontal_peak_count"], stats["vertical_peak_count"]))
                if flag]
        return f"subplots in {len(each)} of {len(flags)} image(s) (any_or_all: {self.any_or_all}): " + "; ".join(each)
