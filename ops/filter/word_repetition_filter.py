from djx import register_op
from djx.ops.common.text_filter import WordsStatFilter, check_positive
from djx.ops.common.text_words import refine_words, word_rep_ratio


@register_op("word_repetition_filter")
class WordRepetitionFilter(WordsStatFilter):
    """Keep samples whose word n-gram repetition is within [min_ratio, max_ratio]:
    `word_rep_ratio` = the share of `rep_len`-word n-grams that occur more than once, over the
    lower-cased words stripped of special characters (0.0 for fewer than rep_len words).
    With `tokenization`, words are the pieces of the SentencePiece model at `tokenizer_model` (a djx
    parameter; unset, Data-Juicer's {lang}.sp.model where its model cache has it)."""

    stat = "word_rep_ratio"
    stat_range = (0, 1)

    def __init__(self, lang: str = "en", tokenization: bool = False, rep_len: int = 10,
                 min_ratio: float = 0.0, max_ratio: float = 0.5, tokenizer_model: str | None = None, **common):
        super().__init__(lang=lang, tokenization=tokenization, tokenizer_model=tokenizer_model, **common)
        check_positive("rep_len", rep_len)
        self.rep_len, self.min_ratio, self.max_ratio = rep_len, min_ratio, max_ratio

    def value(self, text: str) -> float:
        return word_rep_ratio(refine_words(self.words(text), lower_case=True), self.rep_len)
