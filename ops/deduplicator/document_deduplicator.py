import hashlib
import string

from djx import Batch, Deduplicator, RecipeError, register_op
from djx.core.dedup.indexes import ExactIndex
from djx.ops.common.text_words import TEXT_EXTRA

HASH_KEY = "__dj__hash"  # Data-Juicer's HashKeys.hash


def text_hasher(lowercase: bool, ignore_non_character: bool, op: str):
    """Data-Juicer's document hash: md5 of the stripped text, after the optional lower-casing and
    removal of whitespace, digits and ASCII punctuation (its `regex` pattern)."""
    strip = None
    if ignore_non_character:
        try:
            import regex
        except ImportError:
            raise RecipeError(f"{op}: ignore_non_character needs the Python package 'regex': {TEXT_EXTRA}") from None
        strip = regex.compile(rf"\s+|\d+|[{regex.escape(string.punctuation)}]")

    def text_hash(text: str) -> str:
        if lowercase:
            text = text.lower()
        if strip is not None:
            text = strip.sub("", text)
        return hashlib.md5(text.strip().encode("utf-8")).hexdigest()

    return text_hash


@register_op("document_deduplicator")
class DocumentDeduplicator(Deduplicator):
    """Drop samples whose text is an exact duplicate of an earlier one (md5 of the text).

    `lowercase` compares texts lower-cased; `ignore_non_character` ignores whitespace, digits and
    punctuation. The first sample of each group is kept; the others are dropped as `duplicate of <position>`."""

    stats_keys = (HASH_KEY,)
    stat_shapes = {HASH_KEY: "digest"}

    def __init__(self, lowercase: bool = False, ignore_non_character: bool = False, **common):
        super().__init__(**common)
        self.lowercase = lowercase
        self.ignore_non_character = ignore_non_character
        text_hasher(lowercase, ignore_non_character, self.name)  # a missing package is said at load

    def compute_stats(self, batch: Batch) -> None:
        text_hash = text_hasher(self.lowercase, self.ignore_non_character, self.name)
        for sample in batch.samples:
            stats = batch.stats(sample)
            if HASH_KEY not in stats:  # an earlier op of the recipe wrote it: Data-Juicer reuses it
                stats[HASH_KEY] = text_hash(batch.text(sample))

    def index(self, space) -> ExactIndex:
        return ExactIndex(lambda stats: stats[HASH_KEY], space)
