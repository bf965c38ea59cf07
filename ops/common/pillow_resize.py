"""Pillow's bicubic resize, bit for bit, as tensor operations (on a GPU for `image_decode: device`).

The CLIP and BLIP processors resize with Pillow (bicubic, its antialiasing support scaled by the
reduction), so Data-Juicer's pixels are Pillow's. torchvision's antialiased bicubic uses the same
kernel but computes in floating point in one go, and its pixels differ by a level here and there:
4.5e-4 in a CLIP score on an H100, over the 1e-4 the device path promises. Pillow works in two
passes, horizontal then vertical, each with 22-bit fixed-point coefficients and its result rounded
and clipped to uint8 before the next; this module does the same, with the coefficients computed
as Pillow computes them (in double, normalised, then fixed point) and each pass one matrix product
in float64, which holds every sum exactly (255 x 2^22 x a few hundred taps < 2^53).
"""
from __future__ import annotations

import math
from functools import lru_cache

PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed point for 8-bit images
SUPPORT = 2.0                # the bicubic kernel's


def _bicubic(x: float) -> float:
    a = -0.5
    x = abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


@lru_cache(maxsize=64)
def coefficients(in_size: int, out_size: int) -> tuple:
    """Pillow's fixed-point taps for resizing `in_size` to `out_size`: (out_size, in_size) integers
    as nested tuples (cached: a dataset repeats its few image sizes)."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = SUPPORT * filterscale
    rows = []
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        ss = 1.0 / filterscale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        k = [_bicubic((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        ww = sum(k)
        if ww != 0.0:
            k = [w / ww for w in k]
        fixed = [int(-0.5 + w * (1 << PRECISION_BITS)) if w < 0 else int(0.5 + w * (1 << PRECISION_BITS)) for w in k]
        row = [0] * in_size
        row[xmin:xmin + xmax] = fixed
        rows.append(tuple(row))
    return tuple(rows)


@lru_cache(maxsize=64)
def taps_matrix(in_size: int, out_size: int, device: str):
    """The taps as a (in, out) float64 tensor on `device`, made once per size and device: building
    it from the nested tuples (a 640 -> 298 pass holds 190,720) took ~10 ms, which made the GPU
    path 0.15x the host's on an H100."""
    import torch
    return torch.tensor(coefficients(in_size, out_size), dtype=torch.float64).T.contiguous().to(device)


def _pass(image, in_size: int, out_size: int):
    """One pass along the last axis: (..., in) uint8 -> (..., out) uint8, as Pillow rounds and clips."""
    import torch
    k = taps_matrix(in_size, out_size, str(image.device))  # (in, out)
    sums = image.to(torch.float64) @ k + (1 << (PRECISION_BITS - 1))
    return torch.clamp(torch.floor(sums / (1 << PRECISION_BITS)), 0, 255).to(torch.uint8)


def resize_bicubic(image, height: int, width: int):
    """(C, H, W) uint8 -> (C, height, width) uint8, equal to Pillow's Image.resize((width, height),
    BICUBIC) of the same pixels: horizontal pass first, then vertical (each skipped where Pillow
    skips it: that size unchanged)."""
    h, w = int(image.shape[-2]), int(image.shape[-1])
    if w != width:
        image = _pass(image, w, width)
    if h != height:
        image = _pass(image.transpose(-1, -2), h, height).transpose(-1, -2)
    return image.contiguous()


def taps_bound(in_size: int, out_size: int) -> int:
    """How many input pixels one output pixel reads (for a caller that wants to know the cost)."""
    return int(math.ceil(SUPPORT * max(in_size / out_size, 1.0))) * 2 + 1
