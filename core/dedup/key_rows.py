"""KeyRows: the (key, position) rows under every duplicate index, bounded in memory. Up to `budget`
rows stay in memory (24 bytes each); past that they are cut into partitions by key and appended to
files in the run's state folder, and `groups()` gives them back one partition at a time, sorted by
key, so memory stays bounded whatever the dataset's size. A key is two 64-bit words."""
from __future__ import annotations

import glob
import os
import tempfile
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

DEFAULT_BUDGET = 2_000_000  # rows in memory per index (24 bytes each; sorting a partition doubles it)
ROW = np.dtype([("k1", "<u8"), ("k2", "<u8"), ("pos", "<i8")])
_PREFIX = "dedup-table-"
_FANOUT_BITS = 4            # 16 partitions a level
_MAX_DEPTH = 4              # 16^4 partitions before a partition is sorted whatever its size (one huge key)
_SETTLE = 65_536            # rows gathered in lists before they become one array
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: masked keys (SimHash blocks) spread too


@dataclass(frozen=True)
class IndexSpace:
    """Where a deduplicator's index keeps its rows: memory up to `budget` rows for the whole index,
    then files in `folder` (None: memory only, as in Pipeline.process). With a `cluster` (e.g.
    core.executors.ray.dedup_rows.RayGroups), the rows go to the cluster in blocks of `budget` rows
    and the groups are formed there: its `rows()` gives a KeyRows whose `edges` run on the cluster."""
    folder: str | None = None
    budget: int = DEFAULT_BUDGET
    cluster: object | None = None

    def rows(self, share: int = 1) -> "KeyRows":
        """A table with 1/`share` of the budget (an index that keeps several tables at once)."""
        if self.cluster is not None:
            return self.cluster.rows(self.budget)
        return KeyRows(self.folder, max(1, self.budget // share))

    def clear(self) -> None:
        """Remove the files an interrupted dedup phase left behind."""
        for path in glob.glob(os.path.join(self.folder, _PREFIX + "*")) if self.folder else ():
            os.remove(path)


class KeyRows:
    def __init__(self, folder: str | None = None, budget: int = DEFAULT_BUDGET):
        self.folder, self.budget = folder, max(1, budget)
        self.spills = folder is not None  # past the budget, rows leave memory (_spill)
        self.pending: list[tuple] = []  # (k1 array, k2, pos) not yet in `chunks`
        self.one: tuple[list, list, list] = ([], [], [])  # single rows not yet in `chunks`
        self.n_pending = 0
        self.chunks: list[np.ndarray] = []
        self.held = 0                   # rows in `chunks`
        self.top: list = []             # the first level's partition files (None: none yet), once spilled
        self.files: set[str] = set()    # every file not yet removed
        self.disk = self.peak_disk = 0  # bytes in files now, and at most
        self.top_pos = -1               # the largest position added

    def add(self, k1: np.ndarray, k2, pos) -> None:
        """Rows for equal-length uint64 arrays k1 and k2, at `pos` (an int for all, or an array)."""
        self.pending.append((k1, k2, pos))
        self.n_pending += len(k1)
        self.top_pos = max(self.top_pos, pos if isinstance(pos, int) else int(np.max(pos, initial=-1)))
        if self.n_pending >= self._room():
            self._settle()

    def add_one(self, k1: int, k2: int, pos: int) -> None:
        for column, value in zip(self.one, (k1, k2, pos)):
            column.append(value)
        self.n_pending += 1
        if pos > self.top_pos:
            self.top_pos = pos
        if self.n_pending >= self._room():
            self._settle()

    def _room(self) -> int:
        return min(_SETTLE, max(1, self.budget - self.held)) if self.spills else _SETTLE

    def groups(self, shared: bool = False) -> Iterator[np.ndarray]:
        """Every row, sorted by (k1, k2, pos), in arrays that never split a k1 between them; `shared`:
        only the rows whose k1 another row has (the only ones that can join: most keys are unique)."""
        self._settle()
        if not self.top:
            rows = np.concatenate(self.chunks) if self.chunks else np.zeros(0, ROW)
            self.chunks, self.held = [], 0
            yield _sorted(rows, shared)
            return
        self._spill()
        for path in self.top:
            if path is not None:
                yield from self._partition(path, 1, shared)

    def edges(self, fn: Callable[[np.ndarray], object]) -> Iterator:
        """`fn` (core.dedup.edges: key_edges) of each partition's rows whose k1 another row shares
        (a lone key joins nothing), sorted: the groups' Edges."""
        for rows in self.groups(shared=True):
            yield fn(rows)

    def close(self) -> None:
        for path in list(self.files):
            self._drop(path)
        self.chunks, self.pending, self.one, self.n_pending = [], [], ([], [], []), 0

    def _settle(self) -> None:
        if not self.n_pending:
            return
        rows = np.empty(self.n_pending, ROW)
        for field, j in (("k1", 0), ("k2", 1)):
            rows[field] = np.concatenate([e[j] for e in self.pending] + [np.array(self.one[j], dtype=np.uint64)])
        if all(isinstance(e[2], int) for e in self.pending):  # one position per add: repeat it
            lengths = np.fromiter((len(e[0]) for e in self.pending), dtype=np.int64, count=len(self.pending))
            pos = np.repeat(np.fromiter((e[2] for e in self.pending), dtype=np.int64, count=len(self.pending)), lengths)
        else:
            pos = np.concatenate([np.broadcast_to(np.asarray(e[2], dtype=np.int64), (len(e[0]),)) for e in self.pending])
        rows["pos"] = np.concatenate([pos, np.array(self.one[2], dtype=np.int64)])
        self.pending, self.one, self.n_pending = [], ([], [], []), 0
        self.chunks.append(rows)
        self.held += len(rows)
        if self.held >= self.budget and self.spills:
            self._spill()

    def _spill(self) -> None:
        if not self.top:
            self.top = [None] * (1 << _FANOUT_BITS)  # a partition's file is made with its first row
        for rows in self.chunks:
            self._split(rows, self.top, 1)
        self.chunks, self.held = [], 0

    def _split(self, rows: np.ndarray, paths: list, depth: int) -> None:
        """Rows into their partitions' files (`paths`, None where a partition has no file yet: it is
        made here with its first rows; creating a file costs more than writing one, and at a budget
        far below the data most partitions of a deep level stay empty)."""
        part = _partition_of(rows["k1"], depth)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(len(paths) + 1))
        for p in range(len(paths)):
            if bounds[p + 1] > bounds[p]:
                if paths[p] is None:
                    paths[p] = self._new_file()
                with open(paths[p], "ab") as f:
                    rows[order[bounds[p]:bounds[p + 1]]].tofile(f)
        self.disk += rows.nbytes
        self.peak_disk = max(self.peak_disk, self.disk)

    def _partition(self, path: str, depth: int, shared: bool) -> Iterator[np.ndarray]:
        n = os.path.getsize(path) // ROW.itemsize
        if n > self.budget and depth < _MAX_DEPTH:  # too big for memory: cut it by the next bits of the key
            subs = [None] * (1 << _FANOUT_BITS)
            for start in range(0, n, self.budget):  # read, not mapped: a mapped file's pages count as ours
                self._split(np.fromfile(path, dtype=ROW, count=self.budget, offset=start * ROW.itemsize),
                            subs, depth + 1)
            self._drop(path)
            for sub in subs:
                if sub is not None:
                    yield from self._partition(sub, depth + 1, shared)
            return
        rows = np.fromfile(path, dtype=ROW) if n else np.zeros(0, ROW)
        self._drop(path)
        yield _sorted(rows, shared)

    def _new_file(self) -> str:
        fd, path = tempfile.mkstemp(prefix=_PREFIX, suffix=".rows", dir=self.folder)
        os.close(fd)
        self.files.add(path)
        return path

    def _drop(self, path: str) -> None:
        if os.path.exists(path):
            self.disk -= os.path.getsize(path)
            os.remove(path)
        self.files.discard(path)


def _partition_of(k1: np.ndarray, depth: int) -> np.ndarray:
    mixed = k1 * _MIX  # wraps modulo 2^64, as meant
    return ((mixed >> np.uint64(64 - _FANOUT_BITS * depth)) & np.uint64((1 << _FANOUT_BITS) - 1)).astype(np.intp)


def _sorted(rows: np.ndarray, shared: bool = False) -> np.ndarray:
    if shared:  # one sort of k1 finds them: sorting and moving every row took 4x as long
        order = np.argsort(rows["k1"])
        k1 = rows["k1"][order]
        tied = np.zeros(len(rows), bool)
        tied[1:] = k1[1:] == k1[:-1]
        tied[:-1] |= tied[1:]
        rows = rows[order[tied]]
    return rows[np.lexsort((rows["pos"], rows["k2"], rows["k1"]))]


def runs(rows: np.ndarray, by_k2: bool = True) -> np.ndarray:
    """For sorted rows: True where a row starts a new key ((k1, k2), or k1 alone)."""
    new = np.ones(len(rows), bool)
    new[1:] = rows["k1"][1:] != rows["k1"][:-1]
    if by_k2:
        new[1:] |= rows["k2"][1:] != rows["k2"][:-1]
    return new


def firsts(rows: np.ndarray, new: np.ndarray) -> np.ndarray:
    """For sorted rows and their run starts: each row's run's first (smallest) position."""
    return rows["pos"][np.flatnonzero(new)][np.cumsum(new) - 1]
