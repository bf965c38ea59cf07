from djx import register_op
from djx.ops.common.dj_cache import dj_word_lists_dir
from djx.ops.common.text_filter import WordShareFilter
from djx.ops.common.text_words import pick_language, read_word_lists, stopwords_iso


@register_op("stopwords_filter")
class StopWordsFilter(WordShareFilter):
    """Keep samples whose share of stopwords is within [min_ratio, max_ratio]: `stopwords_ratio` =
    lower-cased words (stripped of special characters, plus their joins of `words_aug_group_sizes`
    words with `use_words_aug`) found in the `lang` stopword list ('all': every language).
    The lists: the stopwords*.json files in `stopwords_dir` (Data-Juicer's format); unset, those of
    Data-Juicer's asset cache where it holds its stopwords.json (DATA_JUICER_ASSETS_CACHE), else
    those of the `stopwordsiso` package (not Data-Juicer's lists: its numbers differ).
    With `tokenization`, words are the pieces of the SentencePiece model at `tokenizer_model` (a djx
    parameter; unset, Data-Juicer's {lang}.sp.model where its model cache has it)."""

    stat = "stopwords_ratio"
    stat_range = (0, 1)
    path_params = ("tokenizer_model", "stopwords_dir")

    def __init__(self, lang: str = "en", tokenization: bool = False, min_ratio: float = 0.3,
                 max_ratio: float = 1.0, stopwords_dir: str | None = None, use_words_aug: bool = False,
                 words_aug_group_sizes: list[int] = [2], words_aug_join_char: str = "",  # noqa: B006
                 tokenizer_model: str | None = None, **common):
        super().__init__(lang, tokenization, min_ratio, max_ratio, use_words_aug, words_aug_group_sizes,
                         words_aug_join_char, tokenizer_model, **common)
        stopwords_dir = stopwords_dir or dj_word_lists_dir("stopwords")
        self.stopwords_dir = stopwords_dir

    def notes(self) -> list[str]:
        if self.stopwords_dir:
            return []
        return [f"{self.name}: no stopwords_dir and no stopwords.json in Data-Juicer's asset cache: the "
                f"stopwordsiso lists are used, and their numbers differ from Data-Juicer's; give stopwords_dir "
                f"(a folder of stopwords*.json, Data-Juicer's format) for its numbers"]

    def read_vocabulary(self) -> frozenset[str]:
        d = self.stopwords_dir
        lists = read_word_lists(d, "stopwords", "stopwords_dir") if d else stopwords_iso()
        return pick_language(lists, self.lang, "stopwords_dir" if d else "stopwordsiso")
