import hashlib
from itertools import combinations
from typing import Literal

import numpy as np

from djx import Batch, Deduplicator, RecipeError, register_op
from djx.core.dedup.indexes import PairIndex
from djx.ops.common.shingles import compile_pattern, punctuation_pattern, shingles

SIMHASH_KEY = "__dj__simhash"  # Data-Juicer's HashKeys.simhash
_BLOCK = 1 << 16  # shingles hashed and counted at once


def simhash(tokens: list[bytes]) -> int:
    """simhash-pybind's 64-bit SimHash: each shingle's hash is the first 8 bytes of its md5 (big-endian),
    and a bit is set where more shingles have it set than not."""
    if not tokens:
        return 0
    ones = np.zeros(64, dtype=np.int64)  # column j counts bit 63 - j (the digests' bytes are big-endian)
    for start in range(0, len(tokens), _BLOCK):  # bounded memory for a text of millions of shingles
        digests = b"".join(hashlib.md5(t).digest()[:8] for t in tokens[start:start + _BLOCK])
        ones += np.unpackbits(np.frombuffer(digests, dtype=np.uint8).reshape(-1, 8), axis=1).sum(axis=0, dtype=np.int64)
    return int(sum(1 << (63 - j) for j in range(64) if 2 * int(ones[j]) > len(tokens)))


@register_op("document_simhash_deduplicator")
class DocumentSimhashDeduplicator(Deduplicator):
    """Drop near-duplicate texts: 64-bit SimHash of shingles; texts within `hamming_distance` bits are joined.

    Groups are the connected components (SimHash values within the distance, equal values included),
    and the first sample of each is kept. `num_blocks` must exceed `hamming_distance`: candidates share
    num_blocks - hamming_distance of the blocks the 64 bits are cut into."""

    stats_keys = (SIMHASH_KEY,)
    stat_shapes = {SIMHASH_KEY: "digest"}

    def __init__(self, tokenization: Literal["space", "punctuation", "character"] = "space", window_size: int = 6,
                 lowercase: bool = True, ignore_pattern: str | None = None, num_blocks: int = 6,
                 hamming_distance: int = 4, **common):
        super().__init__(**common)
        if window_size < 1 or num_blocks < 1 or hamming_distance < 1:
            raise RecipeError(f"{self.name}: window_size, num_blocks and hamming_distance must be positive integers")
        if not hamming_distance < num_blocks <= 64:
            raise RecipeError(f"{self.name}.hamming_distance ({hamming_distance}) must be less than num_blocks "
                              f"({num_blocks}), itself at most 64: raise num_blocks or lower hamming_distance")
        self.tokenization, self.window_size, self.lowercase = tokenization, window_size, lowercase
        self.ignore = compile_pattern(ignore_pattern, self.name)
        self.punctuation = punctuation_pattern(self.name) if tokenization == "punctuation" else None
        self.num_blocks, self.hamming_distance = num_blocks, hamming_distance

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        if SIMHASH_KEY in batch.stats(sample):  # an earlier op of the recipe wrote it: Data-Juicer reuses it
            return
        tokens = shingles(batch.text(sample), self.tokenization, self.window_size, self.lowercase, self.ignore,
                          self.punctuation)
        batch.stats(sample)[SIMHASH_KEY] = str(simhash(tokens))  # a decimal string, as Data-Juicer stores it

    def index(self, space) -> PairIndex:
        edges = [int(e) for e in np.linspace(0, 64, self.num_blocks + 1)]
        masks = [((1 << (hi - lo)) - 1) << lo for lo, hi in zip(edges[:-1], edges[1:])]
        families = [np.uint64(sum(masks[b] for b in g))  # near texts agree on all blocks of some family
                    for g in combinations(range(self.num_blocks), self.num_blocks - self.hamming_distance)]
        limit = self.hamming_distance
        return PairIndex(signature=lambda stats: int(stats[SIMHASH_KEY]),
                         candidates=lambda sigs: [sigs & mask for mask in families],
                         near=lambda a, b: np.bitwise_count(a ^ b) <= limit, space=space)
