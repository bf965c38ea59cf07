from typing import Literal

from djx import Batch, ModelSpec, RangeFilter, register_op
from djx.ops.common.text_models import SPACY_INSTALL, remove_special_tokens, spacy_pipeline

ACTION_POS = ("VERB",)
ACTION_TAGS = ("VV", "VB", "VBP", "VBZ", "VBD", "VBG", "VBN")


@register_op("text_action_filter")
class TextActionFilter(RangeFilter):
    """Keep samples whose text holds at least `min_action_num` actions: tokens a spaCy pipeline tags
    as a verb (POS VERB with a verb tag), special tokens removed first, as in Data-Juicer.
    `spacy_model`: a pipeline package or folder; unset, Data-Juicer's unpacked
    `{lang}_core_web_md-3.7.0` where it has one here, else the installed `{lang}_core_web_md`."""

    stats_keys = ("num_action",)
    stat_shapes = {"num_action": "scalar"}
    stat_ranges = {"num_action": (0, None)}
    path_params = ("spacy_model",)
    requires = {"spacy": SPACY_INSTALL}

    def __init__(self, lang: Literal["en", "zh"] = "en", min_action_num: int = 1, spacy_model: str | None = None,
                 **common):
        super().__init__(**common)
        self.lang, self.min_action_num = lang, min_action_num
        self.model = ModelSpec("spacy", spacy_pipeline(self.name, lang, spacy_model))

    def compute_stats(self, batch: Batch) -> None:
        nlp = batch.pool.get(self.model).model
        texts = [remove_special_tokens(batch.text(s), batch.ctx) for s in batch.samples]
        for sample, doc in zip(batch.samples, nlp.pipe(texts)):
            batch.stats(sample)["num_action"] = sum(1 for t in doc if t.pos_ in ACTION_POS and t.tag_ in ACTION_TAGS)

    def keep(self, stats: dict) -> bool:
        return self.in_range(stats["num_action"], self.min_action_num)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("num_action", stats["num_action"], self.min_action_num, None, "min_action_num", "")
