"""The duplicate indexes keep the smallest position of each group whatever the order samples come in,
and give the same answers when their tables spill to disk."""
from __future__ import annotations

import random

import pytest

from djx.core.dedup.first_positions import IndexSpace
from djx.core.dedup.indexes import BandIndex, ExactIndex, UnionFind

KEYS = [f"k{random.Random(i).randrange(40)}" for i in range(300)]
BANDS = [[f"a{random.Random(i).randrange(200)}", f"b{random.Random(-i).randrange(200)}"] for i in range(300)]


def answers(index, stats: list[dict], order: list[int]) -> list[int]:
    for pos in order:
        index.add(pos, stats[pos])
    out = [index.kept_for(pos, s) for pos, s in enumerate(stats)]
    index.close()
    return out


@pytest.mark.parametrize("budget", [1, 7, 10**6])
def test_exact_and_banded_indexes_answer_alike_in_memory_and_spilled(tmp_path, budget):
    space = IndexSpace(str(tmp_path), budget)
    exact = [{"h": k} for k in KEYS]
    banded = [{"b": b} for b in BANDS]
    shuffled = random.Random(3).sample(range(300), 300)
    in_memory = answers(ExactIndex(lambda s: s["h"]), exact, list(range(300)))
    assert answers(ExactIndex(lambda s: s["h"], space), exact, shuffled) == in_memory
    assert in_memory == [KEYS.index(k) for k in KEYS]  # the first in input order
    expected = answers(BandIndex(lambda s: s["b"]), banded, list(range(300)))
    assert answers(BandIndex(lambda s: s["b"], space), banded, shuffled) == expected
    assert not list(tmp_path.iterdir())  # close() removed the spilled tables


def test_union_find_roots_are_the_smallest_member_and_long_chains_do_not_recurse():
    groups = UnionFind()
    for x in range(100_000, 0, -1):
        groups.union(x, x - 1)
    assert groups.find(100_000) == 0 and groups.find(5) == 0


def test_a_banded_index_keeps_its_budget_for_all_its_bands_together(tmp_path):
    """MinHash's default makes 25 band tables: the memory budget is the index's, not each table's
    (25 tables of 2M keys each would hold 5.5 GB before any spilled)."""
    budget, n_bands = 100, 25
    index = BandIndex(lambda stats: stats["bands"], IndexSpace(str(tmp_path), budget))
    for pos in range(400):
        index.add(pos, {"bands": [f"{b}:{pos}" for b in range(n_bands)]})  # every value new: nothing joins
        assert sum(len(t.memory) for t in index.tables) <= budget + n_bands
    assert all(t.db is not None for t in index.tables)  # each band spilled, and still answers
    assert [index.kept_for(pos, {}) for pos in (0, 399)] == [0, 399]
    index.close()
