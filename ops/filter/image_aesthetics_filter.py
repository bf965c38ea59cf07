from djx import register_op
from djx.ops.filter.image_model_filter import ImageModelFilter

DEFAULT_SCORER = "shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE"


@register_op("image_aesthetics_filter")
class ImageAestheticsFilter(ImageModelFilter):
    """Keep samples whose images' aesthetics scores are within [min_score, max_score], one per image.

    The scorer is a LAION aesthetics predictor in shunk031's layout (CLIP vision + projection, a
    linear or MLP head); '' means Data-Juicer's default, shunk031/aesthetics-predictor-v2-sac-logos-
    ava1-l14-linearMSE. As in Data-Juicer, a model whose name contains 'aesthetics-predictor' has its
    0-10 score divided by 10, so the thresholds read on a 0-1 scale; any other scorer's raw output
    is the score.
    """

    stats_keys = ("image_aesthetics_scores",)
    model_kind = "aesthetics_predictor"
    path_params = ("hf_scorer_model",)

    def __init__(self, hf_scorer_model: str = "", min_score: float = 0.5, max_score: float = 1.0, **kw):
        super().__init__(**kw)
        self.hf_scorer_model = hf_scorer_model
        self.min_score, self.max_score = min_score, max_score
        self.by_ten = "aesthetics-predictor" in self.model_name  # Data-Juicer's rule, on the name

    @property
    def model_name(self) -> str:
        return self.hf_scorer_model or DEFAULT_SCORER

    def score(self, loaded, pixels) -> list[float]:
        logits = loaded.model(pixel_values=pixels).logits.float()
        return [float(v) for v in (logits / 10.0 if self.by_ten else logits)[:, 0]]
