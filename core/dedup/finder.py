"""DuplicateFinder: the deduplicators of a chain, applied in order, over the samples that reached
each (Data-Juicer's semantics: a deduplicator sees the samples that passed the ops before it; a later
one does not see the duplicates an earlier one removed)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from djx.core.dedup.key_rows import IndexSpace
from djx.core.op.deduplicator import Deduplicator
from djx.core.recipe.context import STATS_KEY


@dataclass(frozen=True)
class Seen:
    """One sample as the dedup phase reads it back: its position, stats, and how many ops of the
    chain it passed (all of them for a kept sample; for a dropped one, the index of the op that dropped it)."""
    pos: int
    stats: dict
    passed: int


@dataclass(frozen=True)
class Duplicate:
    op_index: int  # the deduplicator that found it
    kept: int      # the position of the sample kept for its group


class DuplicateFinder:
    def __init__(self, ops: list, space: IndexSpace = IndexSpace()):
        self.dedups = [(k, op, op.index(space)) for k, op in enumerate(ops) if isinstance(op, Deduplicator)]

    def __bool__(self) -> bool:
        return bool(self.dedups)

    def build(self, samples: Callable[[], Iterable[Seen]]) -> None:
        """One pass over `samples()` per deduplicator, each index built on the samples that reached
        its op and were not already found duplicates by an earlier deduplicator."""
        for j, (k, _, index) in enumerate(self.dedups):
            for s in samples():
                if s.passed > k and self._duplicate(s, j) is None:
                    index.add(s.pos, s.stats)

    def duplicate_of(self, s: Seen) -> Duplicate | None:
        """What `s` duplicates (the first deduplicator that finds it one), or None."""
        return self._duplicate(s, len(self.dedups))

    def _duplicate(self, s: Seen, upto: int) -> Duplicate | None:
        for k, _, index in self.dedups[:upto]:
            if s.passed <= k:
                return None
            kept = index.kept_for(s.pos, s.stats)
            if kept != s.pos:
                return Duplicate(k, kept)
        return None

    def close(self) -> None:
        for _, _, index in self.dedups:
            index.close()

    def op(self, k: int) -> Deduplicator:
        return next(op for i, op, _ in self.dedups if i == k)


def rejected_hashes(passed: list, sample: dict | None, earlier: frozenset = frozenset()) -> dict | None:
    """The stats of the deduplicators a rejected sample passed (None: none): in Data-Juicer's op order
    they grouped it before the op that failed, so the dedup phase groups it too. `earlier`: the stat
    keys of deduplicators before the chain's first op (a Ray stage's chain is part of the recipe's)."""
    stats = (sample or {}).get(STATS_KEY) or {}
    keys = set(earlier).union(*(op.stats_keys for op in passed if isinstance(op, Deduplicator)))
    found = {k: stats[k] for k in keys if k in stats}
    return found or None


def split_duplicates(finder: DuplicateFinder, kept: list[dict], dropped: list[dict], pos_key: str,
                     stats_key: str, drop_key: str, rejected: Iterable = ()) -> Iterator[tuple[dict, Duplicate | None]]:
    """In memory (Pipeline.process): each kept sample with what it duplicates (None: it stays).
    `rejected`: the Rejections of samples a later op rejected after deduplicators grouped them, as
    the run's dedup phase groups them (they stay rejected; their duplicates are dropped naming them)."""
    n_ops = 1 + max((k for k, _, _ in finder.dedups), default=0)
    every = [Seen(s[pos_key], s.get(stats_key, {}), n_ops + 1) for s in kept] + \
            [Seen(s[pos_key], s.get(stats_key, {}), s[drop_key]["op_index"]) for s in dropped] + \
            [Seen(r.pos, r.hashes, r.op_index) for r in rejected if r.hashes and r.op_index]
    finder.build(lambda: every)
    for s, seen in zip(kept, every):
        yield s, finder.duplicate_of(seen)
