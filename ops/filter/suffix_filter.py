from djx import Batch, Filter, SampleError, register_op
from djx.core.recipe.context import SUFFIX_KEY  # the field the reader fills for this op, as Data-Juicer's


@register_op("suffix_filter")
class SuffixFilter(Filter):
    """Keep samples whose `__dj__suffix__` field is one of `suffixes` (every sample when there are none).

    As Data-Juicer: `suffixes` is one suffix or a list, compared as written (".py" and "py" differ,
    so do ".C" and ".c"); `reversed_range: true` keeps the samples whose suffix is not in the list,
    and, with no suffixes, still every sample. The suffix is the record's own `__dj__suffix__`
    field, kept as the stat `suffix`. In a recipe with this op the reader fills that field where a
    record has none with its data file's suffix (`.jsonl`), as Data-Juicer's reader does; a sample
    without it all the same (records given in Python), or with null or another value that is not a
    string, is rejected with the reason, code `bad_input`: never dropped as if its suffix were wrong."""

    uses_text = False
    stats_keys = ("suffix",)
    stat_shapes = {"suffix": "label"}
    verdict_params = ("suffixes", "reversed_range")

    def __init__(self, suffixes: str | list[str] | None = None, reversed_range: bool = False, **common):
        super().__init__(**common)
        self.suffixes = [suffixes] if isinstance(suffixes, str) else list(suffixes or [])
        self.reversed_range = reversed_range

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        suffix = sample.get(SUFFIX_KEY)
        if not isinstance(suffix, str):
            why = "has no" if suffix is None else f"has {type(suffix).__name__} {suffix!r:.40} as its"
            raise SampleError(f"{self.name}: the sample {why} {SUFFIX_KEY} field (a string such as \".py\"; "
                              f"djx's reader fills it from a data file's name): give each record one to filter "
                              f"it by suffix", "bad_input")
        batch.stats(sample)["suffix"] = suffix

    def keep(self, stats: dict) -> bool:
        if not self.suffixes:
            return True
        return (stats["suffix"] in self.suffixes) != self.reversed_range

    def drop_reason(self, stats: dict) -> str:
        listed = "in" if self.reversed_range else "not in"
        return f"suffix={stats['suffix']!r} {listed} suffixes {self.suffixes}"
