"""What a user reads off a keep-rate curve: the keep rate at each bound of the recipe, and the bound
that gives a wanted keep rate. Also written out as keep_rate.csv."""
from __future__ import annotations

import csv
import math

from djx.analyze.files import replacing, text_cell
from djx.analyze.plots import curve_points
from djx.analyze.sketch import ValueSketch

TARGETS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)


def bound_for(curve, side: str, target: float) -> float | None:
    """The strictest bound on `side` that still keeps `target` of the samples reaching the filter
    (a value of the stat: exact while the sketch holds the values, else within one bin); None when
    even the loosest bound keeps less."""
    values: ValueSketch = curve.sides[side]
    need = math.ceil(target * curve.reached - curve.free - 1e-9)  # samples with values that must pass
    if values.n == 0 or need > values.n:
        return None
    if need <= 0:  # the samples without values alone reach the target
        return values.max if side == "min" else values.min
    rank = values.n - need if side == "min" else need - 1
    return values.percentiles([rank / max(values.n - 1, 1)])[0]


def readouts(curve, bounds, passing: dict) -> dict:
    """{"at_bounds": [(label, side, keep rate)], "for_target": {side: [(target, bound)]}}. `passing`:
    per bound, the samples with values that met it (counted in the pass: the rates at bounds are exact)."""
    at = [(t.label, t.side, (curve.free + passing[t]) / curve.reached if curve.reached else math.nan)
          for t in bounds]
    targets = {side: [(r, bound_for(curve, side, r)) for r in TARGETS] for side in sorted(curve.sides, reverse=True)}
    return {"at_bounds": at, "for_target": targets}


def write_keep_rate_csv(curves: list[dict], path: str) -> None:
    """One row per point of every curve: op_index, op, stat, side, threshold, keep_rate."""
    with replacing(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        w = csv.writer(f)
        w.writerow(("op_index", "op", "stat", "side", "threshold", "keep_rate"))
        for c in curves:
            for side, ts, rates in curve_points(c["curve"], c["bounds"]):
                for t, r in zip(ts, rates):
                    w.writerow((c["op_index"], text_cell(c["op"]), text_cell(c["stat"]), side, repr(float(t)), f"{r:.6f}"))
