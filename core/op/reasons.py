"""Why a filter dropped a sample, in words: the stat, its value and the threshold it missed, e.g.
`image_text_similarity=[0.0397] below min_score 0.2`. Built-ins and plug-ins format values with
the one `fmt` here, so a value reads the same in every reason."""
from __future__ import annotations

import math
import sys


def default_reason(op, stats: dict) -> str:
    """The reason for a drop keep() gave none for: the filter's `drop_reason(stats)` (every
    built-in has one), else the values of the stats it computed."""
    try:
        reason = op.drop_reason(stats)
        if isinstance(reason, str) and reason:
            return reason
    except Exception:  # noqa: BLE001  a reason is no cause to lose the verdict
        pass
    shown = ", ".join(f"{k}={fmt(stats.get(k))}" for k in op.stats_keys)
    return f"{shown} outside the kept range" if shown else "dropped"


def fmt(v, digits: int = 4) -> str:
    """A stat value or bound as a person reads it: 4 significant digits (or `digits`), lists in
    brackets, an unbounded integer default (sys.maxsize) as `none`."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return f"{v:.{digits}g}" if math.isfinite(v) else str(v)
    if isinstance(v, int):
        return "none" if v >= sys.maxsize else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x, digits) for x in v) + "]"
    return repr(v)


def digits_apart(values: list, low, high, both: bool = False) -> int:
    """The significant digits (4 at least) at which each value that misses a bound reads apart from
    it (`both`: from either bound, as under reversed_range): a value just under `min_score
    0.2362086` does not read `0.2362 below min_score 0.2362`."""
    digits = 4
    for v in values:
        bounds = (low, high) if both else (low,) if v < low else (high,) if v > high else ()
        for bound in bounds:
            if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (v, bound)):
                continue
            while digits < 17 and v != bound and f"{float(v):.{digits}g}" == f"{float(bound):.{digits}g}":
                digits += 1
    return digits


def range_reason(stat: str, value, low, high, low_name: str, high_name: str,
                 any_or_all: str | None = None, shown=None) -> str:
    """Why `value` (a number, or one per image or chunk) is outside [low, high]: which bound its
    failing values miss; `shown`: how to print the bounds when not as numbers (e.g. '10KB')."""
    values = value if isinstance(value, list) else [value]
    below = any(v < low for v in values)
    above = any(v > high for v in values)
    digits = digits_apart(values, low, high)
    low_text, high_text = shown or (fmt(low, digits), fmt(high, digits))
    misses = ([f"below {low_name} {low_text}"] if below else []) + ([f"above {high_name} {high_text}"] if above else [])
    text = f"{stat}={fmt(value, digits)} " + " and ".join(misses or [f"outside [{low_text}, {high_text}]"])
    passing = sum(1 for v in values if low <= v <= high)
    if isinstance(value, list) and any_or_all == "all" and passing:
        text += f" (any_or_all: all, and {len(values) - passing} of {len(values)} miss)"
    return text
