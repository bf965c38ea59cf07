"""MinHash signatures are Data-Juicer's, bit for bit, however the shingles are batched: the
division-free `mod 2^61 - 1` agrees with Python's integers on every edge of the reduction, and a
batch of texts (empty ones, one longer than a block) gives each text the signature it gets alone,
which is Data-Juicer's formula written out with Python integers."""
from __future__ import annotations

import hashlib
import random
import struct

import numpy as np

from djx import Pipeline, build_op
from djx.ops.common.shingles import shingles
from djx.ops.deduplicator import document_minhash_deduplicator as mh

P = (1 << 61) - 1


def data_juicers(tokens: set[bytes], a: np.ndarray, b: np.ndarray) -> list[int]:
    """Data-Juicer's MinHash per permutation, one shingle at a time, with Python integers."""
    if not tokens:
        return [(1 << 32) - 1] * len(a)
    hv = [struct.unpack("<I", hashlib.sha1(t).digest()[:4])[0] for t in tokens]
    return [min(((h * int(ai) + int(bi)) % (1 << 64)) % P & 0xFFFFFFFF for h in hv) for ai, bi in zip(a, b)]


def test_the_division_free_reduction_agrees_on_every_edge():
    edges = [0, 1, P - 8, P - 1, P, P + 1, P + 7, P + 8, 2 * P, 2 * P + 1, (1 << 62) - 1, (1 << 62) + P,
             (1 << 64) - 1, (1 << 64) - 2, 7 * (1 << 61) + P - 1, 7 * (1 << 61) + P]
    edges += [random.Random(i).getrandbits(64) for i in range(200)]
    edges += [(k << 61) | ((1 << 61) - 1 - d) for k in range(8) for d in range(9)]  # s near p for each hi
    x = np.array(edges, dtype=np.uint64)
    zero = np.zeros((1, 1), dtype=np.uint64)  # hv * a = 0: b is the value reduced
    work = np.empty((1, len(x)), dtype=np.uint64), np.empty((1, len(x)), dtype=np.uint64)
    low = mh._low32_mod_p(zero, np.zeros(len(x), dtype=np.uint64), x, *work)
    assert low[0].tolist() == [v % P & 0xFFFFFFFF for v in edges]


def test_a_batch_gives_each_text_data_juicers_signature():
    a, b = mh.permutations(64)
    words = [f"w{i}" for i in range(40)]
    texts = ["", "too short", " ".join(words[:12]), " ".join(words) * 30,  # the last: past one block
             "the same five words here", "the same five words here again", "The SAME five words here"]
    sets = [set(shingles(t, "space", 5, True)) for t in texts]
    old_block = mh._BLOCK_VALUES
    mh._BLOCK_VALUES = 64 * 16  # blocks of 16 shingles: texts share one, a long one spans several
    try:
        batched = mh.minhashes(sets, a, b)
    finally:
        mh._BLOCK_VALUES = old_block
    for row, tokens in zip(batched, sets):
        assert row.tolist() == data_juicers(tokens, a, b)
        assert mh.minhash(tokens, a, b).tolist() == row.tolist()


def test_the_op_writes_each_sample_its_band_digests_of_data_juicers_signature():
    op = build_op("document_minhash_deduplicator", {})
    texts = ["alpha beta gamma delta epsilon zeta", "", "caf\u00e9 na\u00efve \u4e2d\u6587 and more words here",
             "one two three four five six seven eight nine ten"]
    kept = list(Pipeline(ops=[op]).process([{"text": t} for t in texts]))
    assert len(kept) == len(texts)
    r = op.num_rows_per_band
    for sample, text in zip(kept, texts):
        values = data_juicers(set(shingles(text, "space", 5, True)), op.perm_a, op.perm_b)
        bands = [b"".join(v.to_bytes(8, "big") for v in values[i * r:(i + 1) * r]) for i in range(op.num_bands)]
        expected = "".join(hashlib.blake2b(band, digest_size=8).hexdigest() for band in bands)
        assert sample["__dj__stats__"]["__dj__minhash"] == expected
