"""Components: disjoint groups of positions, joined by batches of edges with numpy, each group's root
its smallest position (Data-Juicer keeps the first sample of a group). A parent array of 8 bytes per
position up to the largest joined one: 80 MB for 10 million samples, whatever the number of edges."""
from __future__ import annotations

import numpy as np


class Components:
    def __init__(self):
        self.parent = np.zeros(0, dtype=np.int64)  # parent[x] == x: a root

    def join(self, a: np.ndarray, b: np.ndarray) -> None:
        """Put a[i] and b[i] in one group, for every i."""
        if not len(a):
            return
        self._grow(int(max(a.max(), b.max())) + 1)
        ra, rb = self._roots(a), self._roots(b)
        nodes, inverse = np.unique(np.concatenate([ra, rb]), return_inverse=True)
        label = _smallest_connected(len(nodes), inverse[:len(a)], inverse[len(a):])
        self.parent[nodes] = nodes[label]  # nodes are sorted: the smallest index is the smallest position

    def reserve(self, size: int) -> None:
        """Room for positions below `size` at once (growing later copies the array)."""
        self._grow(size, slack=False)

    def settle(self, step: int = 1 << 20) -> None:
        """Point every position at its root, so that `root` is one lookup: pointer jumping in place,
        a slice at a time (a pointer only ever moves up its tree, so any order is right)."""
        changed = True
        while changed:
            changed = False
            for lo in range(0, len(self.parent), step):
                up = self.parent[lo:lo + step]
                jumped = self.parent[up]
                if not np.array_equal(jumped, up):
                    self.parent[lo:lo + step] = jumped
                    changed = True

    def root(self, pos: int) -> int:
        if pos >= len(self.parent):
            return pos
        while (up := int(self.parent[pos])) != pos:
            pos = up
        return pos

    def _grow(self, size: int, slack: bool = True) -> None:
        if size > len(self.parent):
            grown = np.arange(max(size, len(self.parent) * 3 // 2 if slack else 0), dtype=np.int64)
            grown[:len(self.parent)] = self.parent
            self.parent = grown

    def _roots(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(np.int64, copy=True)
        while True:
            up = self.parent[x]
            if np.array_equal(up, x):
                return x
            x = up


def _smallest_connected(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For nodes 0..n-1 and edges (a[i], b[i]): each node's smallest connected node. Pointers only go
    down, so the forest stays acyclic; hooking roots and jumping pointers until every edge's two ends
    share a root takes a few rounds."""
    label = np.arange(n, dtype=np.int64)
    while True:
        la, lb = label[a], label[b]
        if np.array_equal(la, lb):
            return label
        low = np.minimum(la, lb)
        np.minimum.at(label, la, low)
        np.minimum.at(label, lb, low)
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
