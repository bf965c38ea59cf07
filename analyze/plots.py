"""The analysis's pictures (PNG, matplotlib without a display) and the keep-rate numbers behind them."""
from __future__ import annotations

import math
import os

import numpy as np

from djx.analyze.collect import Curve
from djx.analyze.sketch import ValueSketch
from djx.analyze.thresholds import Threshold

CURVE_POINTS = 101


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _literal(name: str) -> str:
    """A name as matplotlib shows it letter for letter: a `$` would start its math mode (and a name
    such as `$x^$` would fail to draw), a lone surrogate (JSON's "\\ud800") cannot be drawn."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8").replace("$", r"\$")


def _span(lo: float, hi: float, bounds: list[float]) -> tuple[float, float]:
    """The x range of a plot: the data, widened to show bounds that lie near it."""
    width = (hi - lo) or max(abs(hi), 1.0)
    for b in bounds:
        if lo - width <= b <= hi + width:
            lo, hi = min(lo, b), max(hi, b)
    pad = ((hi - lo) or 1.0) * 0.02
    return lo - pad, hi + pad


def histogram_png(stat: str, sketches: dict[str, ValueSketch], bounds: list[Threshold], owner: str | None,
                  path: str) -> None:
    """Kept and dropped values of one stat, stacked (dropped by the stat's own filter, `owner`, apart
    from those another op dropped), with the recipe's bounds as vertical lines."""
    plt = _pyplot()
    whole = sketches["all"]
    lo, hi = _span(whole.min, whole.max, [t.value for t in bounds])
    edges = np.linspace(lo, hi, 51)
    kept, here = sketches["kept"].histogram(edges), sketches["dropped_here"].histogram(edges)
    other = np.maximum(sketches["dropped"].histogram(edges) - here, 0)
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=90)
    width = np.diff(edges)
    ax.bar(edges[:-1], kept, width=width, align="edge", color="#4c9a5e", label="kept")
    if owner:
        ax.bar(edges[:-1], here, width=width, align="edge", bottom=kept, color="#d26a4c", label=f"dropped by {_literal(owner)}")
    ax.bar(edges[:-1], other, width=width, align="edge", bottom=kept + here, color="#b9b9b9",
           label="dropped by another op" if owner else "dropped")
    for t in bounds:
        if lo <= t.value <= hi:
            ax.axvline(t.value, color="#222", linestyle="--", linewidth=1)
            ax.annotate(f"{t.param}={t.value:g}", (t.value, 1), xycoords=("data", "axes fraction"),
                        rotation=90, va="top", ha="right", fontsize=7)
    ax.set_title(_literal(stat), fontsize=10)
    ax.set_xlabel("value (per image or chunk for list stats)", fontsize=8)
    ax.set_ylabel("values", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def keep_rates(curve: Curve, side: str, ts: np.ndarray) -> np.ndarray:
    """Share of the samples reaching the filter that a bound at each t would keep (this bound alone)."""
    values = curve.sides[side]
    if curve.reached == 0:
        return np.full(len(ts), math.nan)
    if side == "min":
        passing = values.n - values.count_below(ts)
    else:  # values equal to t pass a max bound too
        passing = values.count_below(np.nextafter(ts, np.inf))
    return (curve.free + passing) / curve.reached


def curve_points(curve: Curve, bounds: list[Threshold]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(side, thresholds, keep rates) for each side of the curve (min when the recipe sets none)."""
    out = []
    for side, values in sorted(curve.sides.items(), reverse=True):
        if values.n == 0:
            continue
        lo, hi = _span(values.min, values.max, [t.value for t in bounds])
        ts = np.linspace(lo, hi, CURVE_POINTS)
        out.append((side, ts, keep_rates(curve, side, ts)))
    return out


def curve_png(curve: Curve, bounds: list[Threshold], rates: list[float], path: str) -> None:
    """The keep-rate curve of one filter's stat, with the recipe's bounds and their (exact) keep rates."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=90)
    lo, hi = math.inf, -math.inf
    for side, ts, line in curve_points(curve, bounds):
        label = f"kept if {_literal(curve.stat)} {'>=' if side == 'min' else '<='} t"
        ax.plot(ts, line * 100, label=label, color="#2c6fbb" if side == "min" else "#8a4fbf")
        lo, hi = min(lo, ts[0]), max(hi, ts[-1])
    for t, rate in zip(bounds, rates):
        if not lo <= t.value <= hi:  # far from the data (e.g. max_len 1000 for texts under 200): in the table only
            continue
        ax.axvline(t.value, color="#222", linestyle="--", linewidth=1)
        ax.annotate(f"{t.param}={t.value:g}: {rate:.1%}", (t.value, rate * 100), fontsize=7,
                    xytext=(4, -12 if t.side == "min" else 4), textcoords="offset points")
    ax.set_ylim(0, 102)
    ax.set_title(f"{_literal(curve.op)}: keep rate of the {curve.reached} samples reaching it", fontsize=9)
    per = "" if curve.any_or_all == "any" else " (all of a sample's values)"
    ax.set_xlabel(f"threshold t on {_literal(curve.stat)}{per}", fontsize=8)
    ax.set_ylabel("% kept", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.")
_STEM_CHARS = 80


class FileNames:
    """One file name per plotted thing, never shared: a name (a stat's, an op's) that is not plain
    (lower-case ASCII letters, digits, `_-.`) or is long gets its safe characters, cut, and a short
    hash of the real name, so that "a/b", "a_b" and "A_b" make three files on any file system."""

    def __init__(self):
        self._taken: set[str] = set()

    def png(self, prefix: str, *names: str) -> str:
        base = "_".join([prefix, *(_stem(n) for n in names)])
        name, n = base, 1
        while name.lower() in self._taken:  # a plain name equal to another's hashed one
            n += 1
            name = f"{base}~{n}"
        self._taken.add(name.lower())
        return name + ".png"


def _stem(text: str) -> str:
    if text and set(text) <= _PLAIN and len(text) <= _STEM_CHARS:
        return text
    import hashlib
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in text[:_STEM_CHARS])
    return f"{safe}-{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def ensure_dir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path
