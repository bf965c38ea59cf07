"""Indexes that deduplicators build on. Each keeps the smallest position of a group, whatever the order
samples are added in, so the kept sample is the first in input order (Data-Juicer's rule).

All three write (key, position) rows to a KeyRows table (memory up to the run's budget, then partition
files in its state folder), and on the first `kept_for` read them back a partition at a time, joining
the samples of equal keys (or near signatures) in a Components array of 8 bytes per position."""
from __future__ import annotations

import hashlib
import json
from typing import Callable, Hashable, Iterable

import numpy as np

from djx.core.dedup.components import Components
from djx.core.dedup.edges import Edges, distinct, key_edges, near_edges
from djx.core.dedup.key_rows import IndexSpace, KeyRows
from djx.core.op.deduplicator import DuplicateIndex

_GATHER = 4096  # samples whose band digests BandIndex turns into rows at once


class GroupedIndex(DuplicateIndex):
    """The part the three share: rows in, groups out; `kept_for` is a sample's group's root."""

    def __init__(self, rows: KeyRows):
        self.rows, self.groups, self.done = rows, Components(), False

    def kept_for(self, pos: int, stats: dict) -> int:
        if not self.done:
            self.finish()
        return self.groups.root(pos)

    def finish(self) -> None:
        """Every sample is in: join the groups (once)."""
        self._join_all(self.rows.edges(key_edges))

    def _join_all(self, edges: Iterable[Edges]) -> None:
        self.groups.reserve(self.rows.top_pos + 1)
        for e in edges:
            self.groups.join(e.a, e.b)
        self.rows.close()
        self.groups.settle()
        self.done = True

    def close(self) -> None:
        self.rows.close()


class ExactIndex(GroupedIndex):
    """Samples with equal keys are duplicates; `key(stats)` None: never a duplicate (e.g. no image).
    A key is compared by a 128-bit BLAKE2 digest of its text."""

    def __init__(self, key: Callable[[dict], Hashable | None], space: IndexSpace = IndexSpace()):
        super().__init__(space.rows())
        self.key = key

    def add(self, pos: int, stats: dict) -> None:
        k = self.key(stats)
        if k is not None:
            digest = hashlib.blake2b(_text(k).encode("utf-8"), digest_size=16).digest()
            self.rows.add_one(int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little"), pos)


class BandIndex(GroupedIndex):
    """Locality-sensitive bands: two samples that share any band value are joined, and groups are the
    connected components (MinHash LSH). `bands(stats)` gives a sample's band values: a band of 16
    hex digits (MinHash's 64-bit digest) is compared as that number, any other by a 128-bit digest."""

    def __init__(self, bands: Callable[[dict], Iterable[Hashable]], space: IndexSpace = IndexSpace()):
        super().__init__(space.rows())
        self.bands = bands
        self.hex: tuple[list[bytes], list[int], list[int]] = ([], [], [])  # raw digests, positions, counts
        self.gathered = 0  # their rows

    def add(self, pos: int, stats: dict) -> None:
        values = list(self.bands(stats))
        raw = _digests(values)
        if raw is not None:  # gathered, then added a few thousand samples at a time (one array each)
            for column, value in zip(self.hex, (raw, pos, len(values))):
                column.append(value)
            self.gathered += len(values)
            if len(self.hex[0]) >= _GATHER or self.gathered >= self.rows.budget:  # never past the budget
                self._add_hex()
            return
        for b, value in enumerate(values):  # (k1, k2) = the digest of "band:value": never a band number
            digest = hashlib.blake2b(f"{b}:{_text(value)}".encode("utf-8"), digest_size=16).digest()
            self.rows.add_one(int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little"), pos)

    def finish(self) -> None:
        self._add_hex()
        super().finish()

    def _add_hex(self) -> None:
        raw, pos, counts = self.hex
        if raw:
            counts = np.array(counts, dtype=np.int64)
            starts = np.repeat(np.cumsum(counts) - counts, counts)
            band = (np.arange(len(starts), dtype=np.int64) - starts).astype(np.uint64)
            k1 = np.frombuffer(b"".join(raw), dtype=">u8").astype(np.uint64)
            self.rows.add(k1, band, np.repeat(np.array(pos, dtype=np.int64), counts))
        self.hex, self.gathered = ([], [], []), 0


class PairIndex(GroupedIndex):
    """Groups are the connected components of `near(a, b)` over samples that share a candidate key:
    `signature(stats)` is a sample's 64-bit unsigned signature, `candidates(sigs)` gives, for an array
    of signatures, one array of uint64 keys per family (every near pair must share a key of one
    family: e.g. SimHash's blocks), and `near(a, b)` answers for two arrays of signatures at once.
    Equal signatures join at once; each family's candidate pairs are compared a partition at a time."""

    def __init__(self, signature: Callable[[dict], int], candidates: Callable[[np.ndarray], list[np.ndarray]],
                 near: Callable[[np.ndarray, np.ndarray], np.ndarray], space: IndexSpace = IndexSpace()):
        super().__init__(space.rows())
        self.signature, self.candidates, self.near, self.space = signature, candidates, near, space

    def add(self, pos: int, stats: dict) -> None:
        self.rows.add_one(self.signature(stats), 0, pos)

    def finish(self) -> None:
        if self.space.cluster is not None:  # on the cluster: equal signatures, then each family's keys
            self._join_all(self.rows.pair_edges(self.candidates, self.near))
        else:
            self._join_all(self._pair_edges())

    def _pair_edges(self) -> Iterable[Edges]:
        """Edges of equal signatures, then of near ones: one row per distinct signature (its first
        position) and candidate key goes to each family's table, read back a family at a time."""
        n_families = len(self.candidates(np.zeros(0, dtype=np.uint64)))
        families = [self.space.rows(share=n_families) for _ in range(n_families)]
        for rows in self.rows.groups():  # equal signatures, then one row per distinct signature
            yield key_edges(rows)
            first = distinct(rows)
            sigs, firsts_pos = first["k1"], first["pos"]
            step = max(1, self.space.budget // max(1, n_families))  # all families' keys: one budget
            for lo in range(0, len(sigs), step):
                part = slice(lo, lo + step)
                for family, keys in zip(families, self.candidates(sigs[part])):
                    family.add(np.asarray(keys, dtype=np.uint64), sigs[part], firsts_pos[part])
        self.rows.close()
        try:
            for family in families:
                family.budget = self.space.budget  # read back one family at a time: the whole budget
                for rows in family.groups(shared=True):  # a key no other row has joins nothing
                    yield near_edges(rows, self.near)
                family.close()  # its files go before the next family's are read
        finally:
            for family in families:
                family.close()

    def close(self) -> None:
        self.rows.close()


def _text(key) -> str:
    return key if isinstance(key, str) else json.dumps(key)


def _digests(values: list) -> bytes | None:
    """The bytes of band values that are all 16 lower-case hex digits (MinHash's), else None."""
    try:
        joined = "".join(values)
        raw = bytes.fromhex(joined) if set(map(len, values)) == {16} else b""
    except (TypeError, ValueError):
        return None
    return raw if len(raw) == 8 * len(values) and joined == joined.lower() else None
