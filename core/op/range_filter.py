"""A filter that keeps a stat within bounds, with Data-Juicer 1.6's three switches of every such
filter: `min_closed_interval` and `max_closed_interval` (is a value equal to the bound kept?) and
`reversed_range` (keep what lies outside the bounds instead).

Data-Juicer's rule, kept here to the letter: `reversed_range` first flips both switches, then the
test is made and negated. So with the default switches a reversed range keeps `v <= min or
v >= max` (the bounds themselves are kept), and with several values (one per image) each value is
tested, then `any_or_all` joins the results. A bound of None is not tested.
"""
from __future__ import annotations

import math

from djx.core.op.base import Filter
from djx.core.op.reasons import digits_apart, fmt, range_reason

RANGE_SWITCHES = ("min_closed_interval", "max_closed_interval", "reversed_range")


class RangeFilter(Filter):
    """Base of the filters whose verdict is a stat within [low, high]: subclasses test each value
    with `in_range` (or `keep_values` for one value per image) and say why with `range_reason`."""

    none_bound_is_open = True  # a min_X or max_X given as null is no bound (validate_params)

    def __init__(self, min_closed_interval: bool = True, max_closed_interval: bool = True,
                 reversed_range: bool = False, **common):
        super().__init__(**common)
        self.reversed_range = reversed_range
        # as Data-Juicer: the switches flip under a reversed range, and the test is then negated
        self.min_closed_interval = min_closed_interval != reversed_range
        self.max_closed_interval = max_closed_interval != reversed_range

    def in_range(self, value, low=None, high=None) -> bool:
        ok = True
        if low is not None:
            ok = value >= low if self.min_closed_interval else value > low
        if high is not None:
            ok = ok and (value <= high if self.max_closed_interval else value < high)
        return ok != self.reversed_range

    def keep_values(self, values: list, low, high, any_or_all: str, empty: bool = True) -> bool:
        """Each value tested, joined by any_or_all; `empty`: the verdict without values (a sample
        without images is kept)."""
        if not values:
            return empty
        oks = [self.in_range(v, low, high) for v in values]
        return any(oks) if any_or_all == "any" else all(oks)

    def default_switches(self) -> bool:
        return self.min_closed_interval and self.max_closed_interval and not self.reversed_range

    def range_reason(self, stat: str, value, low, high, low_name: str, high_name: str,
                     any_or_all: str | None = None, shown=None) -> str:
        """Why `value` was dropped: the bound it misses (djx's range_reason) with the default
        switches; else the values and the set the switches keep, e.g. `(-inf, 10] or [100, inf)`."""
        if self.default_switches():
            return range_reason(stat, value, -float("inf") if low is None else low,
                                float("inf") if high is None else high, low_name, high_name, any_or_all, shown)
        digits = digits_apart(value if isinstance(value, list) else [value], -math.inf if low is None else low,
                              math.inf if high is None else high, both=True)
        low_text, high_text = shown or (fmt(low, digits), fmt(high, digits))
        text = f"{stat}={fmt(value, digits)} not in {self.kept_set(low, high, low_text, high_text)}"
        return text + (f" (any_or_all: {any_or_all})" if isinstance(value, list) and any_or_all else "")

    def kept_set(self, low, high, low_text: str, high_text: str) -> str:
        """The values kept, as intervals: `(10, 100]`, or under reversed_range `(-inf, 10] or [100, inf)`."""
        if not self.reversed_range:
            left = "(-inf" if low is None else ("[" if self.min_closed_interval else "(") + low_text
            right = "inf)" if high is None else high_text + ("]" if self.max_closed_interval else ")")
            return f"{left}, {right}"
        sides = []
        if low is not None:  # negated test: below low, the bound itself kept when the flipped switch is open
            sides.append(f"(-inf, {low_text}" + (")" if self.min_closed_interval else "]"))
        if high is not None:
            sides.append(("(" if self.max_closed_interval else "[") + f"{high_text}, inf)")
        return " or ".join(sides) or "nothing"
