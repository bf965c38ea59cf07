import os

from djx import register_op
from djx.ops.common.dj_cache import dj_assets_dir, dj_word_lists_dir, not_found
from djx.ops.common.text_filter import WordShareFilter
from djx.ops.common.text_words import pick_language, read_word_lists


@register_op("flagged_words_filter")
class FlaggedWordFilter(WordShareFilter):
    """Keep samples whose share of flagged words is within [min_ratio, max_ratio]:
    `flagged_words_ratio` = lower-cased words (stripped of special characters, plus their joins of
    `words_aug_group_sizes` words with `use_words_aug`) found in the `lang` list of the
    flagged_words*.json files in `flagged_words_dir` (Data-Juicer's format; 'all': every language).
    Unset: Data-Juicer's asset cache (DATA_JUICER_ASSETS_CACHE, default ~/.cache/data_juicer/assets)
    when it holds its flagged_words.json; djx ships no list and downloads none.
    With `tokenization`, words are the pieces of the SentencePiece model at `tokenizer_model` (a djx
    parameter; unset, Data-Juicer's {lang}.sp.model where its model cache has it)."""

    stat = "flagged_words_ratio"
    stat_range = (0, 1)
    path_params = ("tokenizer_model", "flagged_words_dir")

    def __init__(self, lang: str = "en", tokenization: bool = False, min_ratio: float = 0.0,
                 max_ratio: float = 0.045, flagged_words_dir: str | None = None, use_words_aug: bool = False,
                 words_aug_group_sizes: list[int] = [2], words_aug_join_char: str = "",  # noqa: B006
                 tokenizer_model: str | None = None, **common):
        flagged_words_dir = flagged_words_dir or dj_word_lists_dir("flagged_words")
        super().__init__(lang, tokenization, min_ratio, max_ratio, use_words_aug, words_aug_group_sizes,
                         words_aug_join_char, tokenizer_model, **common)
        self.flagged_words_dir = flagged_words_dir

    def read_vocabulary(self) -> frozenset[str]:
        lists = read_word_lists(self.flagged_words_dir, "flagged_words", "flagged_words_dir")
        return pick_language(lists, self.lang, "flagged_words_dir")

    @classmethod
    def missing_resources(cls, params: dict) -> list[str]:
        missing = super().missing_resources(params)
        if not params["flagged_words_dir"] and dj_word_lists_dir("flagged_words") is None:
            missing.append(not_found("flagged_words_dir", "a folder of flagged_words*.json files, each "
                                     "{lang: [words]}", os.path.join(dj_assets_dir(), "flagged_words.json")))
        return missing
