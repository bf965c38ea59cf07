"""Deterministic synthetic image/caption pairs: a coloured shape on a plain background.

Used to train the tiny test models and to build the demo dataset, so that model-based
filters have real signal (true captions score higher than wrong ones) without any download.
"""

from __future__ import annotations

import math
import random

from PIL import Image, ImageDraw

COLORS = ("red", "green", "blue", "yellow", "purple", "orange")
SHAPES = ("circle", "square", "triangle", "star")
BACKGROUNDS = ("white", "black", "gray")

_RGB = {
    "red": (220, 30, 30),
    "green": (30, 160, 50),
    "blue": (40, 80, 230),
    "yellow": (245, 215, 0),
    "purple": (140, 50, 190),
    "orange": (255, 130, 0),
    "white": (250, 250, 250),
    "black": (15, 15, 15),
    "gray": (128, 128, 128),
}
_SUPERSAMPLE = 4  # draw large, then downscale: smooth edges like a real photo


def caption(color: str, shape: str, background: str) -> str:
    """The canonical caption, e.g. ``"a red circle on a white background"`` (``"an orange ..."``)."""
    article = "an" if color[0] in "aeiou" else "a"
    return f"{article} {color} {shape} on a {background} background"


def _polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    """Vertices of a square, triangle or 5-pointed star of outer radius ``r``."""
    if shape == "square":
        radii, n = [r * 0.95], 4
    elif shape == "triangle":
        radii, n = [r], 3
    else:  # star: alternate outer and inner radius
        radii, n = [r, r * 0.42], 10
    start = -math.pi / 2 + (math.pi / 4 if shape == "square" else 0.0)  # upright
    return [
        (cx + radii[i % len(radii)] * math.cos(start + 2 * math.pi * i / n),
         cy + radii[i % len(radii)] * math.sin(start + 2 * math.pi * i / n))
        for i in range(n)
    ]


def draw(color: str, shape: str, background: str, size: int | tuple[int, int] = 64, seed: int = 0) -> Image.Image:
    """Render one RGB image; ``size`` is a side or ``(width, height)``.

    ``seed`` jitters position and scale so examples vary; the same arguments always
    give the same pixels. The shape stays inside the central square, so centre crops keep it.
    """
    w, h = (size, size) if isinstance(size, int) else size
    rng = random.Random(f"{color}|{shape}|{background}|{w}x{h}|{seed}")
    k, side = _SUPERSAMPLE, min(w, h)
    r = side * rng.uniform(0.30, 0.40) * k
    cx = (w / 2 + side * rng.uniform(-0.1, 0.1)) * k
    cy = (h / 2 + side * rng.uniform(-0.1, 0.1)) * k
    img = Image.new("RGB", (w * k, h * k), _RGB[background])
    pen = ImageDraw.Draw(img)
    if shape == "circle":
        pen.ellipse([cx - r, cy - r, cx + r, cy + r], fill=_RGB[color])
    else:
        pen.polygon(_polygon(shape, cx, cy, r), fill=_RGB[color])
    return img.resize((w, h), Image.LANCZOS)


def random_attrs(rng: random.Random) -> tuple[str, str, str]:
    """A uniformly random ``(color, shape, background)``."""
    return rng.choice(COLORS), rng.choice(SHAPES), rng.choice(BACKGROUNDS)


def random_pair(rng: random.Random, size: int | tuple[int, int] = 64):
    """Return ``(image, caption, (color, shape, background))`` drawn from ``rng``."""
    attrs = random_attrs(rng)
    return draw(*attrs, size=size, seed=rng.randrange(2**31)), caption(*attrs), attrs


def mismatched_attrs(rng: random.Random, attrs, fields=("color", "shape")) -> tuple[str, str, str]:
    """Change a random non-empty subset of ``fields`` of ``attrs`` to a different value."""
    options = {"color": COLORS, "shape": SHAPES, "background": BACKGROUNDS}
    names = ("color", "shape", "background")
    changed = [f for f in fields if rng.random() < 0.5] or [rng.choice(fields)]
    out = list(attrs)
    for f in changed:
        i = names.index(f)
        out[i] = rng.choice([v for v in options[f] if v != attrs[i]])
    return tuple(out)


def mismatched_caption(rng: random.Random, attrs) -> str:
    """A caption that is wrong about the colour, the shape, or both (background kept)."""
    return caption(*mismatched_attrs(rng, attrs))
