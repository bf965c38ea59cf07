"""Indexes that deduplicators build on. Both keep the smallest position of a group, whatever the
order samples are added in, so the kept sample is the first in input order (Data-Juicer's rule).

Exact keys and band values live in FirstPositions tables (memory up to a budget, then an SQLite file
in the run's state folder); the union-find holds a parent per sample that joined a group, and
PairIndex its candidate buckets, in memory."""
from __future__ import annotations

from typing import Callable, Hashable, Iterable

from djx.core.dedup.first_positions import IndexSpace
from djx.core.op.deduplicator import DuplicateIndex


class ExactIndex(DuplicateIndex):
    """Samples with equal keys are duplicates; `key(stats)` None: never a duplicate (e.g. no image)."""

    def __init__(self, key: Callable[[dict], Hashable | None], space: IndexSpace = IndexSpace()):
        self.key = key
        self.first = space.table()

    def add(self, pos: int, stats: dict) -> None:
        k = self.key(stats)
        if k is not None:
            self.first.offer(k, pos)

    def kept_for(self, pos: int, stats: dict) -> int:
        k = self.key(stats)
        return pos if k is None else self.first.get(k, pos)

    def close(self) -> None:
        self.first.close()


class UnionFind:
    """Disjoint sets of positions whose root is always the smallest member (as Data-Juicer's)."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:  # path compression, iteratively (a long chain must not hit the recursion limit)
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, x: int, y: int) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            low, high = min(rx, ry), max(rx, ry)
            self.parent[high] = low
            self.parent.setdefault(low, low)


class BandIndex(DuplicateIndex):
    """Locality-sensitive bands: two samples that share any band value are joined, and groups are the
    connected components (MinHash LSH with union-find). `bands(stats)` gives a sample's band values."""

    def __init__(self, bands: Callable[[dict], Iterable[Hashable]], space: IndexSpace = IndexSpace()):
        self.bands, self.space = bands, space
        self.tables: list = []
        self.groups = UnionFind()

    def add(self, pos: int, stats: dict) -> None:
        for b, value in enumerate(self.bands(stats)):
            if b == len(self.tables):
                self.tables.append(self.space.table())
                for table in self.tables:  # the space's budget is the index's, shared by its bands
                    table.budget = max(1, self.space.budget // len(self.tables))
            other = self.tables[b].offer(value, pos)
            if other is not None and other != pos:
                self.groups.union(pos, other)

    def kept_for(self, pos: int, stats: dict) -> int:
        return self.groups.find(pos)

    def close(self) -> None:
        for table in self.tables:
            table.close()


class PairIndex(DuplicateIndex):
    """Groups are the connected components of `near(a, b)` over samples that share a `candidates`
    key (a sample's keys must include one that every near sample shares: e.g. SimHash blocks)."""

    def __init__(self, signature: Callable[[dict], int], candidates: Callable[[int], Iterable[Hashable]],
                 near: Callable[[int, int], bool]):
        self.signature, self.candidates, self.near = signature, candidates, near
        self.buckets: dict = {}
        self.seen: dict[int, int] = {}  # signature -> a sample with it: equal signatures join at once
        self.groups = UnionFind()

    def add(self, pos: int, stats: dict) -> None:
        sig = self.signature(stats)
        if sig in self.seen:
            self.groups.union(pos, self.seen[sig])
            return
        self.seen[sig] = pos
        for key in self.candidates(sig):
            bucket = self.buckets.setdefault(key, [])
            for other_pos, other_sig in bucket:
                if self.near(sig, other_sig):
                    self.groups.union(pos, other_pos)
            bucket.append((pos, sig))

    def kept_for(self, pos: int, stats: dict) -> int:
        return self.groups.find(pos)
