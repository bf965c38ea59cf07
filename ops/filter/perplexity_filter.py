from djx import Batch, ModelSpec, RangeFilter, SampleError, register_op
from djx.ops.common.text_models import PERPLEXITY_INSTALL, kenlm_advice, perplexity_missing, perplexity_models, utf8_text


@register_op("perplexity_filter")
class PerplexityFilter(RangeFilter):
    """Keep samples whose perplexity under a KenLM model is within [min_ppl, max_ppl]: the text is
    split into SentencePiece pieces, each line scored by KenLM (with sentence begin and end), and
    the perplexity is 10 ** (-log10 prob / (pieces + one end per line)), rounded to 0.1, as in
    Data-Juicer. `sp_model_path` and `kenlm_model_path` (ARPA or KenLM binary): unset, Data-Juicer's
    `{lang}.sp.model` and `{lang}.arpa.bin` where it has them here (DATA_JUICER_MODELS_CACHE)."""

    stats_keys = ("perplexity",)
    stat_shapes = {"perplexity": "scalar"}
    stat_ranges = {"perplexity": (0, None)}
    path_params = ("sp_model_path", "kenlm_model_path")
    requires = {"sentencepiece": PERPLEXITY_INSTALL, "kenlm": PERPLEXITY_INSTALL}

    def __init__(self, lang: str = "en", min_ppl: float = 0, max_ppl: float = 1500,
                 sp_model_path: str | None = None, kenlm_model_path: str | None = None, **common):
        super().__init__(**common)
        self.lang, self.min_ppl, self.max_ppl = lang, min_ppl, max_ppl
        sp_path, lm_path = perplexity_models(self.name, lang, sp_model_path, kenlm_model_path)
        self.sp_model = ModelSpec("sentencepiece", sp_path)
        self.kenlm_model = ModelSpec("kenlm", lm_path)

    @classmethod
    def missing_resources(cls, params: dict) -> list[str]:
        return perplexity_missing(params["lang"], params["sp_model_path"], params["kenlm_model_path"])

    def notes(self) -> list[str]:
        advice = kenlm_advice(self.kenlm_model)
        return [f"{self.name}: {advice}"] if advice else []

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        pieces = batch.pool.get(self.sp_model).model.encode_as_pieces(utf8_text(batch.text(sample)))
        lm = batch.pool.get(self.kenlm_model).model
        logits, length = 0.0, 0
        for line in " ".join(pieces).splitlines():
            logits += lm.score(line)
            length += len(line.split()) + 1
        try:
            ppl = 10.0 ** (-logits / length) if length != 0 else 0.0
        except OverflowError:
            raise SampleError(f"perplexity overflows a float (log10 prob {logits:.6g} over {length} pieces)",
                              "bad_text") from None
        batch.stats(sample)["perplexity"] = round(ppl, 1)

    def keep(self, stats: dict) -> bool:
        return self.in_range(stats["perplexity"], self.min_ppl, self.max_ppl)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason("perplexity", stats["perplexity"], self.min_ppl, self.max_ppl, "min_ppl", "max_ppl")
