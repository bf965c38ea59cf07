"""The duplicate indexes keep the smallest position of each group whatever the order samples come in,
and give the same answers when their rows spill to disk (a budget of one row cuts the partitions
down to their deepest level)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from djx.core.dedup.components import Components
from djx.core.dedup.indexes import BandIndex, ExactIndex, PairIndex
from djx.core.dedup.key_rows import IndexSpace

KEYS = [f"k{random.Random(i).randrange(40)}" for i in range(300)]
BANDS = [[f"a{random.Random(i).randrange(200)}", f"b{random.Random(-i).randrange(200)}"] for i in range(300)]
HEX_BANDS = [[f"{random.Random(i).randrange(150) + (b << 60):016x}" for b in range(3)] for i in range(300)]
SIGS = [random.Random(i).getrandbits(64) for i in range(60)]
SIGS = [SIGS[i % 60] ^ (1 << random.Random(-i).randrange(64)) * (i % 3 == 0) for i in range(300)]


def answers(index, stats: list[dict], order: list[int]) -> list[int]:
    for pos in order:
        index.add(pos, stats[pos])
    out = [index.kept_for(pos, s) for pos, s in enumerate(stats)]
    index.close()
    return out


def simhash_index(space: IndexSpace = IndexSpace(), limit: int = 3) -> PairIndex:
    blocks = [np.uint64(0xFFFF << (16 * b)) for b in range(4)]  # 3 bits apart: one block at least is equal
    return PairIndex(lambda s: s["sig"], lambda sigs: [sigs & m for m in blocks],
                     lambda a, b: np.bitwise_count(a ^ b) <= limit, space)


def simhash_by_hand(limit: int = 3) -> list[int]:
    """Connected components of all pairs within `limit` bits, each named by its smallest position."""
    root = list(range(len(SIGS)))
    for i in range(len(SIGS)):
        for j in range(i):
            if bin(SIGS[i] ^ SIGS[j]).count("1") <= limit:
                ri, rj = root[i], root[j]
                root = [min(ri, rj) if r in (ri, rj) else r for r in root]
    return root


@pytest.mark.parametrize("budget", [1, 7, 10**6])
def test_every_index_answers_alike_in_memory_and_spilled(tmp_path, budget):
    space = IndexSpace(str(tmp_path), budget)
    shuffled = random.Random(3).sample(range(300), 300)
    cases = [(lambda sp: ExactIndex(lambda s: s["h"], sp), [{"h": k} for k in KEYS]),
             (lambda sp: BandIndex(lambda s: s["b"], sp), [{"b": b} for b in BANDS]),
             (lambda sp: BandIndex(lambda s: s["b"], sp), [{"b": b} for b in HEX_BANDS]),
             (simhash_index, [{"sig": s} for s in SIGS])]
    for make, stats in cases:
        in_memory = answers(make(IndexSpace()), stats, list(range(300)))
        assert answers(make(space), stats, shuffled) == in_memory
        assert not list(tmp_path.iterdir())  # close() removed the spilled rows
    assert answers(ExactIndex(lambda s: s["h"], space), [{"h": k} for k in KEYS], shuffled) == \
        [KEYS.index(k) for k in KEYS]  # the first in input order
    assert answers(simhash_index(space), [{"sig": s} for s in SIGS], shuffled) == simhash_by_hand()


def test_hex_bands_compare_as_numbers_and_other_bands_by_digest_alike():
    as_numbers = answers(BandIndex(lambda s: s["b"]), [{"b": b} for b in HEX_BANDS], list(range(300)))
    as_text = answers(BandIndex(lambda s: [b.upper() for b in s["b"]]), [{"b": b} for b in HEX_BANDS],
                      list(range(300)))
    assert as_numbers == as_text and len(set(as_numbers)) < 300


def test_components_roots_are_the_smallest_member_and_long_chains_settle():
    groups = Components()
    x = np.arange(100_000, 0, -1)
    groups.join(x, x - 1)
    groups.settle()
    assert groups.root(100_000) == 0 and groups.root(5) == 0 and groups.root(10**7) == 10**7
    groups = Components()
    for start in range(0, 1000, 10):  # one batch at a time, the chain's far end first
        x = np.arange(999 - start, 989 - start, -1)
        groups.join(x, x - 1)
    assert groups.root(999) == 0


def test_an_index_holds_at_most_its_budget_in_memory(tmp_path):
    """MinHash's default has 25 bands: the memory budget is the index's, all its bands together."""
    budget, n_bands = 100, 25
    index = BandIndex(lambda stats: stats["bands"], IndexSpace(str(tmp_path), budget))
    for pos in range(400):
        index.add(pos, {"bands": [f"{b}:{pos}" for b in range(n_bands)]})  # every value new: nothing joins
        assert index.rows.held + index.rows.n_pending <= budget + n_bands  # one sample's rows past it at most
    assert index.rows.top and list(tmp_path.iterdir())  # it spilled, and still answers
    assert [index.kept_for(pos, {}) for pos in (0, 399)] == [0, 399]
    index.close()
    assert not list(tmp_path.iterdir())
