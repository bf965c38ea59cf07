from djx import register_op
from djx.ops.filter.image_model_filter import ImageModelFilter, class_one_probability


@register_op("image_watermark_filter")
class ImageWatermarkFilter(ImageModelFilter):
    """Keep samples whose images' watermark probability is at most `prob_threshold`: an image
    classifier's probability of label 1 (amrul-hzz/watermark_detector: 'watermark'), one per image.

    dtype: float32 (default, Data-Juicer's numerics) or bfloat16 / float16 (faster on GPUs).
    """

    stats_keys = ("image_watermark_prob",)
    stat_ranges = {"image_watermark_prob": (0.0, 1.0)}  # a probability
    verdict_params = ("prob_threshold", "any_or_all")
    model_kind = "hf_image_classifier"
    path_params = ("hf_watermark_model",)

    def __init__(self, hf_watermark_model: str = "amrul-hzz/watermark_detector", prob_threshold: float = 0.8,
                 **kw):
        super().__init__(**kw)
        self.hf_watermark_model = hf_watermark_model
        self.prob_threshold = prob_threshold

    @property
    def model_name(self) -> str:
        return self.hf_watermark_model

    def score(self, loaded, pixels) -> list[float]:
        return class_one_probability(loaded, pixels)

    def bounds(self) -> tuple[None, float]:
        return None, self.prob_threshold

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason(self.stat, stats[self.stat], *self.bounds(), "", "prob_threshold", self.any_or_all)
