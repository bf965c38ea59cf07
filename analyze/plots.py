"""The analysis's pictures (PNG, matplotlib without a display) and the keep-rate numbers behind them."""
from __future__ import annotations

import math

import numpy as np

from djx.analyze.collect import Curve
from djx.analyze.sketch import ValueSketch
from djx.analyze.thresholds import Threshold
from djx.analyze.units import byte_axis

CURVE_POINTS = 101
_LABEL_BOX = {"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85}  # a bound's label, legible over a curve


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _literal(name: str) -> str:
    """A name as matplotlib shows it letter for letter: a `$` would start its math mode (and a name
    such as `$x^$` would fail to draw), a lone surrogate (JSON's "\\ud800") cannot be drawn."""
    from djx.core.io.terminal_text import safe  # control characters as escapes: no font has them
    return safe(name).encode("utf-8", "backslashreplace").decode("utf-8").replace("$", r"\$")


def _span(lo: float, hi: float, bounds: list[float]) -> tuple[float, float]:
    """The x range of a plot: the data, widened to show bounds that lie near it."""
    width = (hi - lo) or max(abs(hi), 1.0)
    for b in bounds:
        if lo - width <= b <= hi + width:
            lo, hi = min(lo, b), max(hi, b)
    pad = ((hi - lo) or 1.0) * 0.02
    return lo - pad, hi + pad


def histogram_png(stat: str, sketches: dict[str, ValueSketch], bounds: list[Threshold], owner: str | None,
                  path: str | None, is_bytes: bool = False):
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
            ax.annotate(f"{t.param}={t.shown()}", (t.value, 1), xycoords=("data", "axes fraction"),
                        xytext=(0, 0), textcoords="offset points", rotation=90, va="top", ha="right", fontsize=7, bbox=_LABEL_BOX)
    ax.set_xlim(lo, hi)
    ax.set_title(_literal(stat), fontsize=10)
    ax.set_xlabel("value (per image or chunk for list stats)" + (" in bytes" if is_bytes else ""), fontsize=8)
    ax.set_ylabel("values", fontsize=8)
    return _finish(fig, ax, is_bytes, path)


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


def curve_png(curve: Curve, bounds: list[Threshold], rates: list[float], path: str | None, is_bytes: bool = False):
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
        ax.annotate(f"{t.param}={t.shown()}: {rate:.1%}", (t.value, rate * 100), fontsize=7,
                    xytext=(4, -12 if t.side == "min" else 4), textcoords="offset points", bbox=_LABEL_BOX)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, 102)
    ax.set_title(f"{_literal(curve.op)}: keep rate of the {curve.reached} samples reaching it", fontsize=9)
    per = "" if curve.any_or_all == "any" else " (all of a sample's values)"
    ax.set_xlabel(f"threshold t on {_literal(curve.stat)}{per}", fontsize=8)
    ax.set_ylabel("% kept", fontsize=8)
    return _finish(fig, ax, is_bytes, path)


def _finish(fig, ax, is_bytes: bool, path: str | None):
    """Byte ticks, the legend under the plot (never over a curve, a bound's label or the title), the
    bound labels apart, and the picture written (`path` None: left open, for a test to measure)."""
    if is_bytes:
        byte_axis(ax.xaxis, *ax.get_xlim())
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    fig.tight_layout()
    fig.canvas.draw()  # places the axis labels and ticks where they will be drawn
    _separate(fig, list(ax.texts))
    if path is None:
        return fig
    from djx.analyze.files import replacing
    with replacing(path, "wb") as f:
        fig.savefig(f, format="png")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return None


def _separate(fig, texts) -> None:
    """Move the bounds' labels that overlap an earlier one down (or, rotated, left) until none do."""
    renderer = fig.canvas.get_renderer()
    placed = []
    for t in texts:
        for _ in range(20):
            box = t.get_window_extent(renderer)
            if not any(box.overlaps(p) for p in placed):
                break
            off = t.xyann
            t.xyann = (off[0] - 10, off[1]) if t.get_rotation() else (off[0], off[1] - 10)
        placed.append(t.get_window_extent(renderer))


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
    """The analysis folder, made or checked: it lies beside an export, in a folder others may
    write, and its files are written by fixed names, so it must be this user's (io/private_files)."""
    from djx.core.io.private_files import own_folder
    return own_folder(path, "analysis folder")
