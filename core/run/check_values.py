"""What a recorded stat value must be for `djx check`: a finite number (an int of any size), a string, or a
list of numbers (non-empty when it is one per image and the sample has images), inside the range the op
can produce."""
from __future__ import annotations

import math


def out_of_range(value, bounds) -> str | None:
    if not bounds:
        return None
    low, high = bounds
    outside = [v for v in (value if isinstance(value, list) else [value])
               if isinstance(v, (int, float)) and ((low is not None and v < low) or (high is not None and v > high))]
    return f"out of its possible range [{low}, {high}]: {outside[0]!r}" if outside else None


def bad_value(value, has_images: bool) -> str | None:
    if isinstance(value, bool) or value is None:
        return "missing" if value is None else None
    if isinstance(value, int):  # an int is finite however large (10**400 would overflow isfinite)
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "non-finite"
    if isinstance(value, list):
        if not value and has_images:
            return "empty although the sample has images"
        for v in value:
            if isinstance(v, list):
                bad = bad_value(v, False)
            elif isinstance(v, int) and not isinstance(v, bool):
                bad = None
            elif isinstance(v, float):
                bad = None if math.isfinite(v) else "non-finite"
            else:
                bad = f"not a number ({v!r})"
            if bad:
                return bad
        return None
    if isinstance(value, str):
        return None
    return f"of unexpected type {type(value).__name__}"
