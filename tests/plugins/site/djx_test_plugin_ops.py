"""Plug-in ops loaded by module name (`custom_ops: [djx_test_plugin_ops]`); the folder holding
this file must be on sys.path / PYTHONPATH, as for any installed plug-in package."""
import math
import os
import time
from typing import Literal

from djx import Batch, Filter, Mapper, register_op


@register_op("vowel_ratio_filter")
class VowelRatioFilter(Filter):
    """Keep samples whose share of vowels among letters is within [min_ratio, max_ratio]."""

    stats_keys = ("vowel_ratio",)

    def __init__(self, min_ratio: float = 0.0, max_ratio: float = 1.0, **common):
        super().__init__(**common)
        self.min_ratio, self.max_ratio = min_ratio, max_ratio

    def compute_stats(self, batch: Batch) -> None:
        for sample in batch.samples:
            letters = [c for c in batch.text(sample).lower() if c.isalpha()]
            vowels = sum(c in "aeiou" for c in letters)
            batch.stats(sample)["vowel_ratio"] = vowels / len(letters) if letters else 0.0

    def keep(self, stats: dict) -> bool:
        return self.min_ratio <= stats["vowel_ratio"] <= self.max_ratio


@register_op("wait_for_later_batches_mapper")
class WaitForLaterBatchesMapper(Mapper):
    """Batches holding one of `ids` wait until `later` other batches have passed this op (each leaves
    a file in `folder`), so those certainly finish first: ordering tests wait for a state, not a time.
    Waiting longer than `guard_s` fails the batch (a hang guard; it never lets a test pass)."""

    def __init__(self, ids: list[int] | None = None, later: int = 1, folder: str = "", guard_s: float = 300,
                 **common):
        super().__init__(**common)
        self.ids, self.later, self.folder, self.guard_s = set(ids or ()), later, folder, guard_s

    def process(self, batch: Batch) -> None:
        if not any(s.get("id") in self.ids for s in batch.samples):
            first = batch.samples[0].get("id") if batch.samples else "empty"
            open(os.path.join(self.folder, f"passed-{first}-{os.getpid()}-{time.monotonic_ns()}"), "w").close()
            return
        deadline = time.monotonic() + self.guard_s
        while len(os.listdir(self.folder)) < self.later:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {self.later} later batches passed while this one waited")
            time.sleep(0.01)


@register_op("unreliable_stat_filter")
class UnreliableStatFilter(Filter):
    """A buggy filter for the completeness check: on texts containing `marker` its stat is NaN
    (mode 'nan') or not written at all (mode 'missing'); such samples are still kept."""

    stats_keys = ("unreliable_score",)

    def __init__(self, marker: str = "BAD", mode: Literal["nan", "missing"] = "nan", **common):
        super().__init__(**common)
        self.marker, self.mode = marker, mode

    def compute_stats(self, batch: Batch) -> None:
        for sample in batch.samples:
            text = batch.text(sample)
            if self.marker not in text:
                batch.stats(sample)["unreliable_score"] = float(len(text))
            elif self.mode == "nan":
                batch.stats(sample)["unreliable_score"] = math.nan

    def keep(self, stats: dict) -> bool:
        return True
