import hashlib
import struct
from typing import Literal

import numpy as np

from djx import Batch, Deduplicator, RecipeError, register_op
from djx.core.dedup.indexes import BandIndex
from djx.ops.common.shingles import compile_pattern, punctuation_pattern, shingles
from djx.ops.common.text_words import load_sentencepiece
from djx.ops.deduplicator.lsh_params import optimal_bands

MINHASH_KEY = "__dj__minhash"  # Data-Juicer's HashKeys.minhash
MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64((1 << 32) - 1)
BAND_DIGITS = 16  # each band's values kept as a 64-bit digest (hex) in the stat
_BLOCK_BYTES = 8 * 1024 * 1024


def permutations(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Data-Juicer's n (a, b) pairs, drawn from RandomState(42) in its order."""
    gen = np.random.RandomState(seed=42)
    pairs = [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
             for _ in range(n)]
    return np.array(pairs, dtype=np.uint64).T


def minhash(tokens: set[bytes], perm_a: np.ndarray, perm_b: np.ndarray) -> np.ndarray:
    """The MinHash of a set of shingles: per permutation, min of ((sha1_32(t) * a + b) mod 2^64 mod p) & (2^32 - 1)
    (numpy's wrapping uint64 product, as Data-Juicer computes it); all 2^32 - 1 for no shingle."""
    hv = np.fromiter((struct.unpack("<I", hashlib.sha1(t).digest()[:4])[0] for t in tokens), dtype=np.uint64,
                     count=len(tokens))
    if len(hv) == 0:
        return np.full(len(perm_a), MAX_HASH, dtype=np.uint64)
    per_block = max(1, _BLOCK_BYTES // (len(perm_a) * 8))
    out = None
    for start in range(0, len(hv), per_block):
        block = hv[start:start + per_block]
        low = np.bitwise_and((block[:, None] * perm_a + perm_b) % MERSENNE_PRIME, MAX_HASH).min(axis=0)
        out = low if out is None else np.minimum(out, low)
    return out


@register_op("document_minhash_deduplicator")
class DocumentMinhashDeduplicator(Deduplicator):
    """Drop near-duplicate texts: MinHash of word (or character) shingles, LSH bands, union-find.

    Two texts whose MinHash agrees on a whole band are joined, groups are the connected components,
    and the first sample of each is kept. `num_bands`/`num_rows_per_band` unset: chosen for
    `jaccard_threshold` as Data-Juicer does. The stat holds one 64-bit digest per band (Data-Juicer
    keeps the band's bytes), so two bands are taken as equal when their digests are."""

    stats_keys = (MINHASH_KEY,)
    stat_shapes = {MINHASH_KEY: "digest"}
    path_params = ("tokenizer_model",)

    def __init__(self, tokenization: Literal["space", "punctuation", "character", "sentencepiece"] = "space",
                 window_size: int = 5, lowercase: bool = True, ignore_pattern: str | None = None,
                 num_permutations: int = 256, jaccard_threshold: float = 0.7, num_bands: int | None = None,
                 num_rows_per_band: int | None = None, tokenizer_model: str | None = None, **common):
        super().__init__(**common)
        for key, value in (("window_size", window_size), ("num_permutations", num_permutations),
                           ("num_bands", num_bands), ("num_rows_per_band", num_rows_per_band)):
            if value is not None and value < 1:
                raise RecipeError(f"{self.name}.{key}: must be a positive integer, got {value}")
        if not 0 <= jaccard_threshold <= 1:
            raise RecipeError(f"{self.name}.jaccard_threshold: must be in [0, 1], got {jaccard_threshold}")
        self.tokenization, self.window_size, self.lowercase = tokenization, window_size, lowercase
        self.ignore = compile_pattern(ignore_pattern, self.name)
        self.punctuation = punctuation_pattern(self.name) if tokenization == "punctuation" else None
        self.tokenizer = load_sentencepiece(tokenizer_model, "en") if tokenization == "sentencepiece" else None
        if num_bands is None or num_rows_per_band is None:
            num_bands, num_rows_per_band = optimal_bands(jaccard_threshold, num_permutations)
        if num_bands * num_rows_per_band > num_permutations:
            raise RecipeError(f"{self.name}: num_bands x num_rows_per_band ({num_bands} x {num_rows_per_band}) is "
                              f"more than num_permutations {num_permutations}; lower one of them")
        self.num_bands, self.num_rows_per_band = num_bands, num_rows_per_band
        self.perm_a, self.perm_b = permutations(num_permutations)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        if MINHASH_KEY in batch.stats(sample):  # an earlier op of the recipe wrote it: Data-Juicer reuses it
            return
        tokens = set(shingles(batch.text(sample), self.tokenization, self.window_size, self.lowercase,
                              self.ignore, self.punctuation, self.tokenizer))
        values = minhash(tokens, self.perm_a, self.perm_b)
        r = self.num_rows_per_band
        bands = (bytes(values[i * r:(i + 1) * r].byteswap().data) for i in range(self.num_bands))
        batch.stats(sample)[MINHASH_KEY] = "".join(hashlib.blake2b(band, digest_size=8).hexdigest() for band in bands)

    def index(self, space) -> BandIndex:
        return BandIndex(lambda stats: _bands(stats[MINHASH_KEY]), space)


def _bands(digests: str) -> list[str]:
    return [digests[i:i + BAND_DIGITS] for i in range(0, len(digests), BAND_DIGITS)]
