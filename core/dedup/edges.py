"""Which sample duplicates which, from the rows of complete key groups: the one code path both
engines take. The local engine calls these on each partition it reads back from its files; the Ray
engine on each partition of Ray Data's hash shuffle. Either way the edges go to one Components
array, whose roots are the groups' first positions, so both give the same groups by construction."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from djx.core.dedup.key_rows import firsts, runs


@dataclass(frozen=True)
class Edges:
    """Pairs of positions in one group: a[i] with b[i]."""
    a: np.ndarray
    b: np.ndarray

    @staticmethod
    def none() -> "Edges":
        return Edges(np.zeros(0, np.int64), np.zeros(0, np.int64))


def key_edges(rows: np.ndarray) -> Edges:
    """Rows sorted by (k1, k2, pos), every row of a key among them: each row but a key's first
    joined with that first (equal hashes, equal band values, equal signatures)."""
    new = runs(rows)
    return Edges(rows["pos"][~new], firsts(rows, new)[~new])


def near_edges(rows: np.ndarray, near: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Edges:
    """Rows of one candidate family, sorted by candidate key (k1) then signature (k2), one row per
    signature, every row of a key among them: each pair of a key whose signatures are `near`
    (compared as the next 1, 2, ... rows of the key, all pairs of a key at once per distance)."""
    key, sig, pos = rows["k1"], rows["k2"], rows["pos"]
    found_a, found_b = [], []
    for d in range(1, len(rows)):
        same = np.flatnonzero(key[d:] == key[:-d])
        if not len(same):
            break
        close = same[np.asarray(near(sig[same], sig[same + d]), dtype=bool)]
        found_a.append(pos[close])
        found_b.append(pos[close + d])
    if not found_a:
        return Edges.none()
    return Edges(np.concatenate(found_a), np.concatenate(found_b))


def distinct(rows: np.ndarray) -> np.ndarray:
    """Rows sorted by (k1, k2, pos): the first row of each (k1, k2)."""
    return rows[runs(rows)]
