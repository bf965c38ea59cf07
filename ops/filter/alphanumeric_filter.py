import sys

from djx import register_op
from djx.ops.common.text_filter import TextStatFilter
from djx.ops.common.text_words import load_hf_tokenizer


@register_op("alphanumeric_filter")
class AlphanumericFilter(TextStatFilter):
    """Keep samples whose share of alphanumeric characters is within [min_ratio, max_ratio]:
    `alnum_ratio` = alphanumeric characters / characters; with `tokenization`, `alpha_token_ratio`
    = letters / tokens of the Hugging Face tokenizer `hf_tokenizer` (Data-Juicer hard-codes
    EleutherAI/pythia-6.9b-deduped; djx loads it, or another, offline only). Empty text: 0.0."""

    path_params = ("hf_tokenizer",)
    stats_keys = ("alnum_ratio", "alpha_token_ratio")  # one of them, as `tokenization` says
    stat_shapes = {"alnum_ratio": "scalar", "alpha_token_ratio": "scalar"}
    stat_ranges = {"alnum_ratio": (0, 1), "alpha_token_ratio": (0, None)}

    def __init__(self, tokenization: bool = False, min_ratio: float = 0.25, max_ratio: float = sys.maxsize,
                 hf_tokenizer: str = "EleutherAI/pythia-6.9b-deduped", **common):
        super().__init__(**common)
        self.tokenization, self.hf_tokenizer = tokenization, hf_tokenizer
        self.min_ratio, self.max_ratio = min_ratio, max_ratio
        self.stat = "alpha_token_ratio" if tokenization else "alnum_ratio"
        self.stats_keys = (self.stat,)
        self.tokenizer = load_hf_tokenizer(hf_tokenizer, "hf_tokenizer") if tokenization else None

    def value(self, text: str) -> float:
        if self.tokenizer is not None:
            tokens = len(self.tokenizer.tokenize(text))
            return sum(1 for c in text if c.isalpha()) / tokens if tokens else 0.0
        return sum(1 for c in text if c.isalnum()) / len(text) if text else 0.0
