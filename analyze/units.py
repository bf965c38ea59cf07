"""How the report prints a stat's values and bounds: sizes in bytes as "5 MB" / "512 KB" (the units
image_size_filter parses, KB = 1024 bytes as in Data-Juicer), and always with enough significant digits
that a value and the bound next to it read differently (0.2999 is never shown as 0.3's "0.30")."""
from __future__ import annotations

import math

# stats that hold a size in bytes: known names, plus any stat a `*_bytes` bound is set on
BYTE_STATS = frozenset({"image_sizes", "video_sizes", "audio_sizes", "file_size", "file_sizes"})
_UNITS = (("TB", 1024 ** 4), ("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024))
DIGITS = 6  # the fewest significant digits shown


def byte_stats(filters) -> frozenset[str]:
    """The stats of a run that hold bytes: the known names and the stats bounded by `*_bytes`."""
    bounded = {t.stat for f in filters for t in f.thresholds if t.is_bytes}
    return BYTE_STATS | bounded


def _plain(value: float, digits: int) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.{digits}g}"


def _bytes(value: float, digits: int) -> str:
    if not math.isfinite(value):
        return str(value)
    for unit, size in _UNITS:
        if abs(value) >= size:
            return f"{_plain(value / size, digits)} {unit}"
    return f"{_plain(value, digits)} B"


def fmt(value, is_bytes: bool = False, near=()) -> str:
    """`value` as the report prints it; `near`: the values it must not read the same as (a bound
    next to a sample's value, or the values either side of a bound), digits added until it does not."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    show = _bytes if is_bytes else _plain
    digits = DIGITS
    text = show(value, digits)
    while digits < 17 and any(o != value and show(o, digits) == text for o in near if isinstance(o, (int, float))):
        digits += 1
        text = show(value, digits)
    return text


def byte_axis(axis, lo: float, hi: float) -> None:
    """Ticks of a byte axis at round numbers of its unit (0, 1, 2 MB; not 1e6), labelled as sizes."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator
    size = next((s for _, s in _UNITS if max(abs(lo), abs(hi)) >= s), 1)
    ticks = [t * size for t in MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(lo / size, hi / size)
             if lo <= t * size <= hi]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _bytes(v, 4)))
