from djx import RecipeError, register_op
from djx.ops.common.text_filter import WordShareFilter
from djx.ops.common.text_words import pick_language, read_word_lists


@register_op("flagged_words_filter")
class FlaggedWordFilter(WordShareFilter):
    """Keep samples whose share of flagged words is within [min_ratio, max_ratio]:
    `flagged_words_ratio` = lower-cased words (stripped of special characters, plus their joins of
    `words_aug_group_sizes` words with `use_words_aug`) found in the `lang` list of the
    flagged_words*.json files in `flagged_words_dir` (Data-Juicer's format; 'all': every language).
    djx ships no list and downloads none: flagged_words_dir is required.
    With `tokenization`, words are the pieces of the SentencePiece model at `tokenizer_model` (a djx
    parameter: Data-Juicer loads its own {lang}.sp.model from its cache or the network)."""

    stat = "flagged_words_ratio"
    stat_range = (0, 1)
    path_params = ("tokenizer_model", "flagged_words_dir")

    def __init__(self, lang: str = "en", tokenization: bool = False, min_ratio: float = 0.0,
                 max_ratio: float = 0.045, flagged_words_dir: str | None = None, use_words_aug: bool = False,
                 words_aug_group_sizes: list[int] = [2], words_aug_join_char: str = "",  # noqa: B006
                 tokenizer_model: str | None = None, **common):
        if not flagged_words_dir:
            raise RecipeError("flagged_words_filter needs flagged_words_dir: a folder of JSON files named "
                              "flagged_words*.json, each {lang: [words]} (Data-Juicer's flagged_words.json)")
        super().__init__(lang, tokenization, min_ratio, max_ratio, use_words_aug, words_aug_group_sizes,
                         words_aug_join_char, tokenizer_model, **common)
        self.flagged_words_dir = flagged_words_dir

    def read_vocabulary(self) -> frozenset[str]:
        lists = read_word_lists(self.flagged_words_dir, "flagged_words", "flagged_words_dir")
        return pick_language(lists, self.lang, "flagged_words_dir")
