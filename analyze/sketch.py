"""Streaming summaries of one stat's values in fixed memory.

`ValueSketch` keeps exact count, mean, std (Chan's parallel update), min and max, and the
distribution in a fixed number of equal-width bins whose width doubles when a value falls outside
them. Until `EXACT_LIMIT` values have been seen it keeps the values themselves, so small outputs get
exact percentiles; after that a percentile is off by at most one bin width, which stays under
2 x range / BINS (0.1% of the stat's range with 2048 bins).
"""
from __future__ import annotations

import math

import numpy as np

BINS = 2048
EXACT_LIMIT = 8192   # values kept as they are before switching to the binned distribution
_FLUSH = 16384       # values buffered in a Python list before a numpy update


class ValueSketch:
    """Count, mean, std (ddof=1), min, max exactly; percentiles and histograms from bins."""

    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.exact: list[np.ndarray] | None = []  # None once binned
        self.origin = self.width = 0.0
        self.k0 = 0                                 # grid index of counts[0]
        self.counts = np.zeros(0, dtype=np.int64)
        self._buf: list[float] = []

    # -- adding -------------------------------------------------------------------------------
    def add(self, value: float) -> None:
        self._buf.append(value)
        if len(self._buf) >= _FLUSH:
            self.flush()

    def extend(self, values) -> None:
        self._buf.extend(values)
        if len(self._buf) >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        arr = np.asarray(self._buf, dtype=np.float64)
        self._buf = []
        arr = arr[np.isfinite(arr)]
        if not arr.size:
            return
        self._moments(arr)
        if self.exact is not None:
            self.exact.append(arr)
            if sum(a.size for a in self.exact) > EXACT_LIMIT:
                held, self.exact = np.concatenate(self.exact), None
                self._start_bins(held)
                self._bin(held)
            return
        self._bin(arr)

    def _moments(self, arr: np.ndarray) -> None:
        n_b, mean_b = arr.size, float(arr.mean())
        m2_b = float(((arr - mean_b) ** 2).sum())
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        self.min = min(self.min, float(arr.min()))
        self.max = max(self.max, float(arr.max()))

    def _start_bins(self, held: np.ndarray) -> None:
        lo, hi = float(held.min()), float(held.max())
        self.origin = lo
        self.width = (hi - lo) / (BINS // 2) if hi > lo else max(abs(lo), 1.0) * 1e-9
        self.k0 = -(BINS // 4)  # room on both sides before the first doubling
        self.counts = np.zeros(BINS, dtype=np.int64)

    def _bin(self, arr: np.ndarray) -> None:
        k = np.floor((arr - self.origin) / self.width).astype(np.int64)
        while k.min() < self.k0 or k.max() >= self.k0 + BINS:
            k = self._double(k)
        np.add.at(self.counts, k - self.k0, 1)

    def _double(self, k: np.ndarray) -> np.ndarray:
        """Twice as wide bins (pairs merged), re-centred on what is held plus `k`; returns k on the new grid."""
        self.width *= 2
        k = k // 2
        held = np.nonzero(self.counts)[0]
        idx = (self.k0 + held) // 2
        lo, hi = int(k.min()), int(k.max())
        if held.size:
            lo, hi = min(lo, int(idx.min())), max(hi, int(idx.max()))
        span = hi - lo + 1
        # centred when all fits; else keep what is held and let the caller double again
        self.k0 = lo - (BINS - span) // 2 if span <= BINS else int(idx.min())
        counts = np.zeros(BINS, dtype=np.int64)
        np.add.at(counts, idx - self.k0, self.counts[held])
        self.counts = counts
        return k

    # -- reading ------------------------------------------------------------------------------
    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else math.nan

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    def values(self) -> np.ndarray | None:
        """The values themselves while they are few enough to be kept; else None."""
        self.flush()
        return np.concatenate(self.exact) if self.exact else (np.zeros(0) if self.exact is not None else None)

    def edges_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """The occupied bins: edges (len m+1) and counts (len m)."""
        self.flush()
        held = np.nonzero(self.counts)[0]
        first, last = int(held[0]), int(held[-1])
        counts = self.counts[first:last + 1]
        edges = self.origin + (self.k0 + np.arange(first, last + 2)) * self.width
        return edges, counts

    def percentiles(self, qs) -> list[float]:
        """Percentiles (0..1) as numpy's linear interpolation (pandas' describe) gives them."""
        self.flush()
        if self.n == 0:
            return [math.nan for _ in qs]
        values = self.values()
        if values is not None:
            return [float(v) for v in np.percentile(values, [100 * q for q in qs])]
        out = []
        for q in qs:
            h = (self.n - 1) * q
            lo = math.floor(h)
            a, b = self._order_stat(lo), self._order_stat(min(lo + 1, self.n - 1))
            out.append(a + (h - lo) * (b - a))
        return out

    def _order_stat(self, r: int) -> float:
        """The r-th smallest value (0-based), placed evenly within its bin, clamped to [min, max]."""
        edges, counts = self.edges_counts()
        cum = np.cumsum(counts)
        b = int(np.searchsorted(cum, r, side="right"))
        before = int(cum[b - 1]) if b else 0
        v = edges[b] + (r - before + 0.5) / counts[b] * self.width
        return float(min(max(v, self.min), self.max))

    def count_below(self, ts: np.ndarray) -> np.ndarray:
        """How many values are < each t (exact while values are kept, else linear within bins)."""
        values = self.values()
        if values is not None:
            return np.searchsorted(np.sort(values), ts, side="left").astype(np.float64)
        edges, counts = self.edges_counts()
        cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
        return np.interp(ts, edges, cum)

    def histogram(self, edges: np.ndarray) -> np.ndarray:
        """Counts on the given edges (a bin's count placed at its centre when binned)."""
        values = self.values()
        if values is not None:
            return np.histogram(values, edges)[0]
        if self.n == 0:
            return np.zeros(len(edges) - 1, dtype=np.int64)
        own, counts = self.edges_counts()
        centres = np.clip((own[:-1] + own[1:]) / 2, self.min, self.max)
        return np.histogram(centres, edges, weights=counts)[0]
