"""EmbeddingIndex: near-duplicates by the cosine of L2-normalised embeddings (SemDeDup's scheme).

Spherical k-means (a fixed seed, a few iterations) cuts the samples into clusters; within a cluster
each sample is compared with every earlier one (input order), blockwise. A sample whose most similar
earlier sample has a cosine >= the threshold duplicates it; following those links back ends at a
sample with no such earlier one, which is kept for the whole chain (the first of its group in input
order, Data-Juicer's rule). Pairs in different clusters are never compared: k-means is what makes
the search scale, as in SemDeDup; with one cluster the search is exact.

Each sample's best earlier cosine is computed once, so how many samples any threshold would remove
is one count (`removed_at`). The embeddings stay in memory up to the IndexSpace's budget (an
embedding counts as `ROWS_PER_VECTOR` of the other indexes' 24-byte rows), the rest go to a file in the run's state folder
that the search reads back in blocks."""
from __future__ import annotations

import os
import tempfile
from array import array
from typing import Callable, Iterable

import numpy as np

from djx.core.dedup.key_rows import _PREFIX, IndexSpace
from djx.core.errors import DjxError
from djx.core.op.deduplicator import DuplicateIndex

ROWS_PER_VECTOR = 40      # a 512-d float16 embedding (1 KB) weighs about forty 24-byte rows (key_rows.py)
SAMPLES_PER_CLUSTER = 1000  # n_clusters unset: one cluster per this many samples (pairs ~ n x 500)
KMEANS_ITERATIONS = 10
KMEANS_SEED = 0
BLOCK = 1024              # rows compared at once (a block x block float32 product: 4 MB)


class VectorStore:
    """Positions and float16 vectors in the order added: in memory up to `cap` vectors, then
    appended to a file in `folder` (None: memory only)."""

    def __init__(self, folder: str | None, cap: int):
        self.folder, self.cap = folder, max(1, cap)
        self.positions = array("q")
        self.memory: list[np.ndarray] = []
        self.dim: int | None = None
        self.path: str | None = None
        self.stored = 0  # vectors in the file

    def append(self, pos: int, vector: np.ndarray) -> None:
        if self.dim is None:
            self.dim = len(vector)
        elif len(vector) != self.dim:
            raise DjxError(f"embeddings of {len(vector)} and {self.dim} values in one deduplicator: the stats "
                           f"come from different models; run again with recompute_stats: true")
        self.positions.append(pos)
        self.memory.append(np.asarray(vector, dtype=np.float16))
        if len(self.memory) >= self.cap and self.folder is not None:
            self._spill()

    def matrix(self) -> np.ndarray:
        """All vectors as one (n, dim) float16 array, in the order added (a read-only map of the
        file where they spilled)."""
        if self.path is None:
            return np.stack(self.memory) if self.memory else np.zeros((0, self.dim or 1), np.float16)
        self._spill()
        return np.memmap(self.path, dtype=np.float16, mode="r", shape=(self.stored, self.dim))

    def close(self) -> None:
        self.memory.clear()
        if self.path is not None and os.path.exists(self.path):
            os.remove(self.path)
        self.path = None

    def _spill(self) -> None:
        if not self.memory:
            return
        if self.path is None:
            fd, self.path = tempfile.mkstemp(prefix=_PREFIX + "embeddings-", suffix=".f16", dir=self.folder)
            os.close(fd)
        with open(self.path, "ab") as f:
            f.write(np.stack(self.memory).tobytes())
        self.stored += len(self.memory)
        self.memory.clear()


class EmbeddingIndex(DuplicateIndex):
    """`vector(stats)`: the sample's L2-normalised embedding (None: never a duplicate, e.g. no
    image). `n_clusters` None: one cluster per SAMPLES_PER_CLUSTER samples."""

    def __init__(self, vector: Callable[[dict], np.ndarray | None], threshold: float,
                 n_clusters: int | None = None, space: IndexSpace = IndexSpace()):
        self.vector, self.threshold, self.n_clusters = vector, threshold, n_clusters
        self.store = VectorStore(space.folder, space.budget // ROWS_PER_VECTOR)
        self.search: NeighbourSearch | None = None
        self.root: np.ndarray | None = None

    def add(self, pos: int, stats: dict) -> None:
        v = self.vector(stats)
        if v is not None:
            self.store.append(pos, v)

    def kept_for(self, pos: int, stats: dict) -> int:
        search = self.finished()
        j = int(np.searchsorted(search.positions, pos))
        if j == len(search.positions) or search.positions[j] != pos:
            return pos  # no embedding: never a duplicate
        if self.root is None:
            self.root = search.roots(self.threshold)
        return int(search.positions[self.root[j]])

    def removed_at(self, thresholds: Iterable[float]) -> dict[float, int]:
        """How many of the samples added each threshold would remove."""
        best = self.finished().best
        return {t: int(np.count_nonzero(best >= t)) for t in thresholds}

    def finished(self) -> "NeighbourSearch":
        """The search over every sample added (run once, at the first question)."""
        if self.search is None:
            positions = np.frombuffer(self.store.positions, dtype=np.int64)
            n = len(positions)
            k = self.n_clusters or -(-n // SAMPLES_PER_CLUSTER)
            self.search = NeighbourSearch(self.store.matrix(), positions, max(1, min(k, n)))
        return self.search

    def close(self) -> None:
        self.search = None
        self.store.close()


class NeighbourSearch:
    """For every sample (in input order: `positions` sorted), its best cosine with an earlier
    sample of its cluster (`best`, -inf: none) and which sample that is (`parent`, an index)."""

    def __init__(self, vectors: np.ndarray, positions: np.ndarray, n_clusters: int):
        self.order = np.argsort(positions, kind="stable")  # sorted index -> row of `vectors`
        self.positions = positions[self.order]
        if len(self.positions) > 1 and (np.diff(self.positions) == 0).any():
            raise DjxError("a sample was given to the semantic deduplicator twice")
        self.vectors = vectors
        n = len(self.positions)
        self.best = np.full(n, -np.inf, dtype=np.float32)
        self.parent = np.arange(n)
        labels = self._kmeans(n_clusters) if n_clusters > 1 else np.zeros(n, dtype=np.int64)
        by_cluster = np.argsort(labels, kind="stable")  # members of a cluster stay in input order
        ends = np.cumsum(np.bincount(labels, minlength=n_clusters))
        for start, end in zip(np.concatenate(([0], ends[:-1])), ends):
            self._search(by_cluster[start:end])

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """The float32 vectors of the samples at sorted indices `idx`."""
        return np.asarray(self.vectors[self.order[idx]], dtype=np.float32)

    def roots(self, threshold: float) -> np.ndarray:
        """Per sample, the index of the sample kept for it at `threshold` (itself when kept)."""
        root = np.where(self.best >= threshold, self.parent, np.arange(len(self.best)))
        while True:  # follow the links to their ends, doubling the distance each step
            further = root[root]
            if np.array_equal(further, root):
                return root
            root = further

    def _kmeans(self, k: int) -> np.ndarray:
        """Spherical k-means: cluster labels per sorted index (deterministic: seeded, input order)."""
        n = len(self.positions)
        rng = np.random.default_rng(KMEANS_SEED)
        centres = _unit(self.rows(np.sort(rng.choice(n, size=k, replace=False))))
        labels = np.full(n, -1, dtype=np.int64)
        for _ in range(KMEANS_ITERATIONS):
            sums, changed = np.zeros_like(centres), False
            for a in range(0, n, BLOCK):
                idx = np.arange(a, min(a + BLOCK, n))
                x = self.rows(idx)
                got = np.argmax(x @ centres.T, axis=1)
                changed |= bool((got != labels[idx]).any())
                labels[idx] = got
                by = np.argsort(got, kind="stable")  # each cluster's rows together, summed at once
                present, starts = np.unique(got[by], return_index=True)
                sums[present] += np.add.reduceat(x[by], starts, axis=0)
            if not changed:
                break
            filled = np.linalg.norm(sums, axis=1) > 0  # an emptied cluster keeps its centre
            centres[filled] = _unit(sums[filled])
        return labels

    def _search(self, members: np.ndarray) -> None:
        """Best earlier cosine of each member (members in input order), block against block."""
        for a in range(0, len(members), BLOCK):
            rows = members[a:a + BLOCK]
            r = self.rows(rows)
            for b in range(0, a + len(rows), BLOCK):
                cols = members[b:b + BLOCK]
                sims = r @ self.rows(cols).T
                earlier = (b + np.arange(len(cols)))[None, :] < (a + np.arange(len(rows)))[:, None]
                sims[~earlier] = -np.inf
                top, arg = sims.max(axis=1), sims.argmax(axis=1)
                better = top > self.best[rows]  # ties: the earlier block, the earlier column wins
                self.best[rows[better]] = top[better]
                self.parent[rows[better]] = cols[arg[better]]


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)
