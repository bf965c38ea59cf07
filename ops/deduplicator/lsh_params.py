"""MinHash LSH bands and rows as Data-Juicer (after datasketch) picks them when not given: the (b, r)
with b * r <= num_permutations that minimises the mean of the false-positive and false-negative
probability masses around `threshold`. The integrands are polynomials of degree b * r, so a
Gauss-Legendre rule of more than half that many points integrates them exactly (scipy's quad,
which Data-Juicer calls, agrees to ~1e-12)."""
from __future__ import annotations

import numpy as np


def optimal_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    nodes, weights = np.polynomial.legendre.leggauss(num_perm // 2 + 2)
    best, choice = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = _integral(lambda s: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold, nodes, weights)
            fn = _integral(lambda s: (1 - s ** float(r)) ** float(b), threshold, 1.0, nodes, weights)
            error = fp * 0.5 + fn * 0.5
            if error < best:
                best, choice = error, (b, r)
    return choice


def _integral(f, low: float, high: float, nodes: np.ndarray, weights: np.ndarray) -> float:
    half = (high - low) / 2
    return float(half * np.dot(weights, f(half * nodes + (high + low) / 2)))
