import sys

from djx import register_op
from djx.ops.common.text_filter import WordsStatFilter
from djx.ops.common.text_words import refine_words


@register_op("words_num_filter")
class WordsNumFilter(WordsStatFilter):
    """Keep samples whose word count is within [min_num, max_num]: `num_words` = the words left
    once each is stripped of special characters (case kept; a word of only such characters drops).
    With `tokenization`, words are the pieces of the SentencePiece model at `tokenizer_model` (a djx
    parameter; unset, Data-Juicer's {lang}.sp.model where its model cache has it)."""

    stat = "num_words"
    low_name, high_name = "min_num", "max_num"

    def __init__(self, lang: str = "en", tokenization: bool = False, min_num: int = 10,
                 max_num: int = sys.maxsize, tokenizer_model: str | None = None, **common):
        super().__init__(lang=lang, tokenization=tokenization, tokenizer_model=tokenizer_model, **common)
        self.min_num, self.max_num = min_num, max_num

    def value(self, text: str) -> int:
        return len(refine_words(self.words(text)))
