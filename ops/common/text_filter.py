"""The base of the model-free text filters: one stat per sample, kept within [low, high].

Each subclass names its stat and computes it from the text alone (`value`); the base writes it, keeps
a closed interval (Data-Juicer's default) and says why a sample was dropped. The word filters
share Data-Juicer's `tokenization` switch: a SentencePiece model split words instead of whitespace.
"""
from __future__ import annotations

from djx import Batch, RangeFilter, RecipeError
from djx.ops.common.sp_words import SentencePieceWords
from djx.ops.common.text_words import refine_words, share_in, split_words


class TextStatFilter(RangeFilter):
    """Keeps a sample when its one stat `stat` lies in [low, high] (the parameters low_name, high_name)."""

    stat = ""
    low_name, high_name = "min_ratio", "max_ratio"
    stat_range: tuple[float | None, float | None] = (0, None)

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("stat"):
            cls.stats_keys = (cls.stat,)
            cls.stat_shapes = {cls.stat: "scalar"}
            cls.stat_ranges = {cls.stat: cls.stat_range}

    def value(self, text: str) -> float | int:
        raise NotImplementedError

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample)[self.stat] = self.value(batch.text(sample))

    def bounds(self) -> tuple:
        return getattr(self, self.low_name), getattr(self, self.high_name)

    def keep(self, stats: dict) -> bool:
        return self.in_range(stats[self.stat], *self.bounds())

    def drop_reason(self, stats: dict) -> str:
        low, high = self.bounds()
        return self.range_reason(self.stat, stats[self.stat], low, high, self.low_name, self.high_name)


class WordsStatFilter(SentencePieceWords, TextStatFilter):
    """A text filter over words: Data-Juicer's `lang` and `tokenization` (a SentencePiece model at
    `tokenizer_model` splits words when on; unset, Data-Juicer's `{lang}.sp.model` where its model
    cache has it)."""

    def __init__(self, lang: str = "en", tokenization: bool = False, tokenizer_model: str | None = None,
                 **common):
        super().__init__(**common)
        self.lang, self.tokenization, self.tokenizer_model = lang, tokenization, tokenizer_model
        self.tokenizer = None  # read by load_resources; a missing model is said by missing_resources

    def words(self, text: str) -> list[str]:
        self.load_resources()  # an op made in Python and used without a run: read on first use
        return split_words(text, self.tokenizer)


def check_positive(name: str, *values: int) -> None:
    if any(v < 1 for v in values):
        raise RecipeError(f"{name}: must be >= 1, got {values[0] if len(values) == 1 else list(values)}")


class WordShareFilter(WordsStatFilter):
    """Share of the (lower-cased, stripped, optionally augmented) words that are in a word list:
    Data-Juicer's flagged_words and stopwords filters."""

    def __init__(self, lang: str, tokenization: bool, min_ratio: float, max_ratio: float,
                 use_words_aug: bool, words_aug_group_sizes: list[int], words_aug_join_char: str,
                 tokenizer_model: str | None, **common):
        super().__init__(lang=lang, tokenization=tokenization, tokenizer_model=tokenizer_model, **common)
        check_positive("words_aug_group_sizes", *words_aug_group_sizes)
        self.min_ratio, self.max_ratio = min_ratio, max_ratio
        self.use_words_aug, self.words_aug_join_char = use_words_aug, words_aug_join_char
        self.words_aug_group_sizes = list(words_aug_group_sizes)
        self.vocabulary: frozenset[str] | None = None

    def read_vocabulary(self) -> frozenset[str]:
        """The op's word list, read from its files (the subclass says which)."""
        raise NotImplementedError

    def load_resources(self) -> None:
        super().load_resources()
        if self.vocabulary is None:
            self.vocabulary = self.read_vocabulary()

    def value(self, text: str) -> float:
        words = refine_words(self.words(text), lower_case=True, use_words_aug=self.use_words_aug,
                             group_sizes=self.words_aug_group_sizes, join_char=self.words_aug_join_char)
        return share_in(words, self.vocabulary)
