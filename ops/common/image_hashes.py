"""The perceptual hashes of imagededup 0.3 (Data-Juicer's image_deduplicator uses them), written
again here: imagededup imports torchvision, which its hashes never use.

Each hash resizes the RGB image with Lanczos to a small grey image, takes 64 bits from it and writes
them as 16 hex digits (row-major, numpy.packbits). `phash`: the top-left 8x8 of the 32x32 image's
unnormalised DCT-II, each >= the median of the 63 non-DC values. `dhash`: 9x8 pixels, each greater
than its left neighbour. `ahash`: 8x8 pixels >= their mean. `whash`: the 256x256 image / 255,
five levels of the Haar wavelet, the 8x8 approximation >= its median.

The arithmetic follows imagededup's where bits can depend on it: the Haar steps round as PyWavelets
does. Its DCT is scipy's FFT, which gives exact zeros where a flat image has them; this one is a
matrix product rounded to 1e-6, so that values equal in exact arithmetic tie here too. Equal to
imagededup's bits on random, flat and drawn images (tools/dj_fixtures/dedup.py checks the fixtures)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image

METHODS = ("phash", "dhash", "whash", "ahash")
_SIZE = {"phash": (32, 32), "dhash": (9, 8), "ahash": (8, 8), "whash": (256, 256)}
_HAAR = 0.7071067811865476  # PyWavelets' Haar decomposition filter taps


def image_hash(image: Image.Image, method: str) -> str:
    """The 16-hex-digit hash of an RGB image."""
    grey = np.asarray(image.resize(_SIZE[method], Image.LANCZOS).convert("L"), dtype=np.uint8)
    bits = _BITS[method](grey)
    return np.packbits(bits).tobytes().hex()


@lru_cache(maxsize=4)
def _dct_rows(n: int) -> np.ndarray:
    """The first 8 rows of the unnormalised DCT-II of size n."""
    k = np.arange(8)[:, None]
    return 2.0 * np.cos(np.pi * k * (2 * np.arange(n)[None, :] + 1) / (2 * n))


def _phash(grey: np.ndarray) -> np.ndarray:
    basis = _dct_rows(grey.shape[0])
    coef = np.round(basis @ grey.astype(np.float64) @ basis.T, 6)  # float noise to exact ties, as a flat image gives
    rest = coef.ravel()[1:]
    return coef >= np.partition(rest, len(rest) // 2)[len(rest) // 2]  # the median of 63 values: the middle one


def _dhash(grey: np.ndarray) -> np.ndarray:
    return grey[:, 1:] > grey[:, :-1]


def _ahash(grey: np.ndarray) -> np.ndarray:
    return grey >= np.mean(grey)


def _haar_step(x: np.ndarray, axis: int) -> np.ndarray:
    """One Haar approximation step along `axis` (even length), each product rounded as PyWavelets does."""
    x = np.moveaxis(x, axis, 0)
    out = _HAAR * x[0::2] + _HAAR * x[1::2]
    return np.moveaxis(out, 0, axis)


def _whash(grey: np.ndarray) -> np.ndarray:
    approx = grey / 255
    for _ in range(5):  # PyWavelets' dwt2 goes along the rows' axis first, then the columns'
        approx = _haar_step(_haar_step(approx, 0), 1)
    return approx >= np.median(approx.ravel())


_BITS = {"phash": _phash, "dhash": _dhash, "ahash": _ahash, "whash": _whash}
