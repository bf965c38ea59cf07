from djx import register_op
from djx.ops.filter.image_model_filter import ImageModelFilter, class_one_probability


@register_op("image_nsfw_filter")
class ImageNSFWFilter(ImageModelFilter):
    """Keep samples whose images' NSFW scores are within [min_score, max_score]: an image
    classifier's probability of label 1 (Falconsai/nsfw_image_detection: 'nsfw'), one per image.

    dtype: float32 (default, Data-Juicer's numerics) or bfloat16 / float16 (faster on GPUs).
    """

    stats_keys = ("image_nsfw_score",)
    stat_ranges = {"image_nsfw_score": (0.0, 1.0)}  # a probability
    model_kind = "hf_image_classifier"
    path_params = ("hf_nsfw_model",)

    def __init__(self, hf_nsfw_model: str = "Falconsai/nsfw_image_detection", min_score: float = 0.0,
                 max_score: float = 0.5, **kw):
        super().__init__(**kw)
        self.hf_nsfw_model = hf_nsfw_model
        self.min_score, self.max_score = min_score, max_score

    @property
    def model_name(self) -> str:
        return self.hf_nsfw_model

    def score(self, loaded, pixels) -> list[float]:
        return class_one_probability(loaded, pixels)
