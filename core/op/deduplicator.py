"""Deduplicator: the third kind of op. Its per-sample part runs in the workers like a filter's
(`compute_sample`/`compute_stats` write a hash or signature as a stat, reused like any stat); its
whole-dataset part, a `DuplicateIndex`, decides after the streaming pass which samples duplicate
an earlier one (Data-Juicer's rule: the first in input order is kept)."""
from __future__ import annotations

from typing import ClassVar

from djx.core.op.base import Filter


class DuplicateIndex:
    """The whole-dataset part of one deduplicator: it sees every sample that passed the op (`add`,
    in any order), then names, for each, the sample kept for its group (`kept_for`)."""

    def add(self, pos: int, stats: dict) -> None:
        raise NotImplementedError

    def kept_for(self, pos: int, stats: dict) -> int:
        """The position of the sample kept for this one's group: `pos` itself when this one is kept."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the index holds (its files on disk); called once the phase is done."""


class Deduplicator(Filter):
    """A filter whose verdict needs the whole dataset: in the streaming pass it writes its stats and
    keeps every sample; `index()` makes the part that picks the duplicates afterwards. A duplicate
    goes to the dropped output with the reason `duplicate of <position>`."""

    duplicate_word: ClassVar[str] = "duplicate of"
    # True: Data-Juicer drops this op's hash column after the op (MinHash), so a later op of the same
    # kind computes its own; djx keeps one such stat per sample, so two with other parameters clash
    own_signature: ClassVar[bool] = False

    def keep(self, stats: dict) -> bool:
        return True  # the dedup phase decides, once every sample's hash is known

    def index(self, space) -> DuplicateIndex:
        """A fresh, empty index for one run; `space` (core.dedup.key_rows.IndexSpace) gives it
        rows that spill to disk past the run's memory budget."""
        raise NotImplementedError(f"{self.name or type(self).__name__} defines no index(): a Deduplicator "
                                  f"returns the DuplicateIndex that picks its duplicates")

    def reason(self, kept: int) -> str:
        return f"{self.duplicate_word} {kept}"
