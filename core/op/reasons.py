"""The reason a sample was dropped, when the filter's keep() gave none: the filter's own account
(`drop_reason(stats)`: every built-in filter names the stat, its value and the threshold), else
the stats it computed."""
from __future__ import annotations

import math


def default_reason(op, stats: dict) -> str:
    """The filter's own account (`drop_reason(stats)`, every built-in filter has one: the stat, its
    value and the threshold), else the stats it computed."""
    explain = getattr(op, "drop_reason", None)
    if callable(explain):
        try:
            reason = explain(stats)
            if isinstance(reason, str) and reason:
                return reason
        except Exception:  # noqa: BLE001  a reason is no cause to lose the verdict
            pass
    shown = ", ".join(f"{k}={fmt(stats.get(k))}" for k in getattr(op, "stats_keys", ()))
    return f"{shown} outside the kept range" if shown else "dropped"


def fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return repr(v)
