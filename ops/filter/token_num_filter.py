import sys

from djx import Batch, register_op
from djx.ops.common.text_filter import TextStatFilter
from djx.ops.common.text_words import load_hf_tokenizer

TOKENIZE_BATCH = 128  # texts per tokenizer call


@register_op("token_num_filter")
class TokenNumFilter(TextStatFilter):
    """Keep samples whose token count is within [min_num, max_num]: `num_token` = the tokens of the
    Hugging Face tokenizer `hf_tokenizer` (no special tokens added), loaded offline only: a local
    folder, or a hub id already in the Hugging Face cache."""

    stat = "num_token"
    low_name, high_name = "min_num", "max_num"
    path_params = ("hf_tokenizer",)

    def __init__(self, hf_tokenizer: str = "EleutherAI/pythia-6.9b-deduped", min_num: int = 10,
                 max_num: int = sys.maxsize, **common):
        super().__init__(**common)
        self.hf_tokenizer, self.min_num, self.max_num = hf_tokenizer, min_num, max_num
        self.tokenizer = load_hf_tokenizer(hf_tokenizer, "hf_tokenizer")

    def value(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def compute_stats(self, batch: Batch) -> None:
        texts = [batch.text(s) for s in batch.samples]
        for start in range(0, len(texts), TOKENIZE_BATCH):
            ids = self.tokenizer(texts[start:start + TOKENIZE_BATCH], add_special_tokens=False)["input_ids"]
            for sample, tokens in zip(batch.samples[start:start + TOKENIZE_BATCH], ids):
                batch.stats(sample)[self.stat] = len(tokens)
