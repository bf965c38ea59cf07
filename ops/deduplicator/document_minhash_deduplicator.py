import hashlib
from typing import Literal, Sequence

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
_BLOCK_VALUES = 1 << 16  # shingles x permutations at once: two uint64 blocks of 512 KB
_61, _ONE = np.uint64(61), np.uint64(1)


def permutations(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Data-Juicer's n (a, b) pairs, drawn from RandomState(42) in its order."""
    gen = np.random.RandomState(seed=42)
    pairs = [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
             for _ in range(n)]
    return np.array(pairs, dtype=np.uint64).T


def minhash(tokens: set[bytes], perm_a: np.ndarray, perm_b: np.ndarray) -> np.ndarray:
    """The MinHash of a set of shingles: per permutation, min of ((sha1_32(t) * a + b) mod 2^64 mod p) & (2^32 - 1)
    (numpy's wrapping uint64 product, as Data-Juicer computes it); all 2^32 - 1 for no shingle."""
    return minhashes([tokens], perm_a, perm_b)[0]


def minhashes(sets: Sequence[set[bytes]], perm_a: np.ndarray, perm_b: np.ndarray) -> np.ndarray:
    """`minhash` of each set, as one (len(sets), permutations) array: the shingles of many texts go
    through the arithmetic together, a cache-sized block of whole texts at a time."""
    counts = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    ends = np.cumsum(counts)
    digests = b"".join(hashlib.sha1(t).digest() for s in sets for t in s)
    hv = np.frombuffer(digests, dtype="<u4")[::5].astype(np.uint64)[:, None]  # each sha1's first 4 bytes
    out = np.full((len(sets), len(perm_a)), MAX_HASH, dtype=np.uint32)
    rows = max(1, _BLOCK_VALUES // len(perm_a))
    x, y = np.empty((rows, len(perm_a)), dtype=np.uint64), np.empty((rows, len(perm_a)), dtype=np.uint64)
    i, start = 0, 0
    while i < len(sets):
        j = max(i + 1, int(np.searchsorted(ends, start + rows, "right")))  # texts i..j-1: one block
        for lo in range(start, int(ends[j - 1]), rows):  # more than one only for a text longer than a block
            n = min(rows, int(ends[j - 1]) - lo)
            low = _low32_mod_p(hv[lo:lo + n], perm_a, perm_b, x[:n], y[:n])
            for k in range(i, j):
                a, b = max(int(ends[k] - counts[k]) - lo, 0), min(int(ends[k]) - lo, n)
                if a < b:
                    np.minimum(out[k], low[a:b].min(axis=0), out=out[k])
        i, start = j, int(ends[j - 1])
    return out.astype(np.uint64)


def _low32_mod_p(hv: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """((hv * a + b) mod 2^64 mod p) mod 2^32 for p = 2^61 - 1, without a division: x = hi * 2^61 + lo
    is hi + lo (mod p), and s = hi + lo <= p + 7 is x mod p, or, where s >= p (a chance of about
    2^-58 a value), s - p = s + 1 - 2^61, whose low 32 bits are those of s + 1."""
    np.multiply(hv, a, out=x)
    np.add(x, b, out=x)
    np.right_shift(x, _61, out=y)
    np.bitwise_and(x, MERSENNE_PRIME, out=x)
    np.add(x, y, out=x)
    if x.max() >= MERSENNE_PRIME:
        np.add(x, x >= MERSENNE_PRIME, out=x, casting="unsafe")
    return x.astype(np.uint32)  # the low 32 bits


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
    own_signature = True  # Data-Juicer removes the MinHash column after the op

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

    def compute_stats(self, batch: Batch) -> None:
        """The whole batch's shingles through the MinHash arithmetic at once (a sample whose stat an
        earlier op of the recipe wrote keeps it: Data-Juicer reuses it)."""
        todo = [s for s in batch.samples if MINHASH_KEY not in batch.stats(s)]
        sets = [set(shingles(batch.text(s), self.tokenization, self.window_size, self.lowercase, self.ignore,
                             self.punctuation, self.tokenizer)) for s in todo]
        width = 8 * self.num_rows_per_band
        for sample, values in zip(todo, minhashes(sets, self.perm_a, self.perm_b).astype(">u8")):
            raw = values.tobytes()  # each band's values, big-endian, as Data-Juicer joins them
            batch.stats(sample)[MINHASH_KEY] = b"".join(
                hashlib.blake2b(raw[i * width:(i + 1) * width], digest_size=8).digest()
                for i in range(self.num_bands)).hex()

    def index(self, space) -> BandIndex:
        return BandIndex(lambda stats: _bands(stats[MINHASH_KEY]), space)


def _bands(digests: str) -> list[str]:
    return [digests[i:i + BAND_DIGITS] for i in range(0, len(digests), BAND_DIGITS)]
