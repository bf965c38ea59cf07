"""The one streaming pass over a run's outputs: every figure of the analysis, in bounded memory.

Per stat: sketches of all, kept and dropped values (and of those dropped by the filter that
computes the stat). Per filter and bound: the distribution of the
value that decides each sample reaching the filter (for the keep-rate curve), and the k samples
nearest the bound on each side (the galleries). Per rejection code: a count and a few examples.
"""
from __future__ import annotations

import heapq
import itertools
import math
import sys
from collections import Counter
from dataclasses import dataclass, field

from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY

from djx.analyze.duplicates import DuplicateGroups
from djx.analyze.sketch import ValueSketch
from djx.analyze.stat_names import StatNames
from djx.analyze.thresholds import FilterInfo, Threshold, reduce_for
from djx.analyze.units import byte_stats

GALLERY_SIZE = 6        # samples per side of each bound
FIRST_SCREEN = 4        # kept and dropped samples shown at the top of the report
REJECTION_EXAMPLES = 3  # examples per rejection code
_TEXT_CHARS = 300
_NUMBER = (int, float)  # exact types: a bool or a string stat is no number to summarise
_BIG = int(sys.float_info.max)  # an int beyond it (10**400) has no float: not a finite number
_MISSING = object()


@dataclass
class Curve:
    """The deciding values of the samples that reach one filter, per bound side ("min", "max")."""
    op_index: int
    op: str
    stat: str
    any_or_all: str
    sides: dict = field(default_factory=dict)   # side -> ValueSketch of each sample's deciding value
    reached: int = 0     # as the summary's funnel counts them: with those rejected there or later
    free: int = 0        # samples without values (no images): kept whatever the bound
    rejected: int = 0    # reached it, then rejected (there or later): kept at no bound


class Gallery:
    """The samples nearest one bound, on the dropped and on the kept side (bounded heaps)."""

    def __init__(self, threshold: Threshold, reduce: str, k: int = GALLERY_SIZE):
        self.threshold, self.reduce, self.k = threshold, reduce, k
        self.bound, self.is_min = threshold.value, threshold.side == "min"
        self.sides: dict[str, list] = {"dropped": [], "kept": []}
        self.passing = 0  # samples with values that meet this bound (counted exactly)
        self._seq = itertools.count()

    def wants(self, side: str, distance: float) -> bool:
        heap = self.sides[side]
        return len(heap) < self.k or distance < -heap[0][0]

    def offer(self, side: str, distance: float, item: dict) -> None:
        entry = (-distance, next(self._seq), item)
        heap = self.sides[side]
        if len(heap) < self.k:
            heapq.heappush(heap, entry)
        else:
            heapq.heapreplace(heap, entry)

    def items(self, side: str) -> list[dict]:
        return [e[2] for e in sorted(self.sides[side], key=lambda e: (-e[0], e[1]))]


def _extremes(value) -> tuple | None:
    """(largest, smallest) number of a stat value: the one that meets or misses a bound, whichever
    way the filter reduces a list; None when it holds no number (a sample without images)."""
    if type(value) is list:
        nums = [v for v in value if finite(v)]
        return (max(nums), min(nums)) if nums else None
    return (value, value) if finite(value) else None


def finite(value) -> bool:
    """Whether a stat value is a number analyze summarises: an int or float (never a bool or a
    string, as djx check reads them), finite and within a float's range."""
    if type(value) is int:
        return -_BIG <= value <= _BIG
    return type(value) is float and math.isfinite(value)


class Collector:
    """Takes every kept, dropped and rejected record once (`add`, `add_rejected`), then `finish`."""

    def __init__(self, filters: list[FilterInfo], text_key: str = "text", image_key: str = "images",
                 names: StatNames | None = None, to_sample=None, duplicates: DuplicateGroups | None = None):
        self.filters, self.text_key, self.image_key = filters, text_key, image_key
        self.to_sample = to_sample  # an output record -> djx's sample (text, images), e.g. from LLaVA
        self.names = names or StatNames(frozenset(s for f in filters for s in f.stats) or None)
        self.stats: dict[str, dict[str, ValueSketch]] = {}  # stat -> all, kept, dropped, dropped_here
        self.owner = {stat: f.op_index for f in filters for stat in f.stats}  # the filter computing a stat
        self.kept = self.dropped = self.rejected = 0
        self.dropped_by: Counter = Counter()       # op index -> samples it dropped
        self.rejected_by_code: Counter = Counter()
        self.rejected_by_op: Counter = Counter()
        self.rejection_examples: dict[str, list] = {}
        self.left_out: Counter = Counter()  # stat -> its values that are not finite numbers (summarised stats)
        self.non_finite: Counter = Counter()  # stat -> of those, the NaN, infinite or too large numbers
        self.curves: dict[tuple, Curve] = {}
        self.galleries: list[Gallery] = []
        self.byte_stats = byte_stats(filters)
        self.first: dict[str, list] = {"kept": [], "dropped": []}  # the first samples with images, per kind
        self.duplicates = duplicates if duplicates is not None else DuplicateGroups()
        self._plan = []  # per filter: (info, [(stat, curve, [(reduce, sketch, [galleries])])])
        for f in filters:
            per_stat = []
            for stat in f.stats:
                bounds = [t for t in f.thresholds if t.stat == stat]
                curve = self.curves[(f.op_index, stat)] = Curve(f.op_index, f.name, stat, f.any_or_all)
                sides = []
                for side in sorted({t.side for t in bounds}) or ["min"]:
                    curve.sides[side] = ValueSketch()
                    gals = [Gallery(t, reduce_for(side, f.any_or_all)) for t in bounds if t.side == side]
                    self.galleries += gals
                    sides.append((reduce_for(side, f.any_or_all), curve.sides[side], gals))
                per_stat.append((stat, curve, sides))
            self._plan.append((f, per_stat))

    def add(self, rec: dict, kind: str) -> None:
        """One kept or dropped record."""
        stats, drop, drop_at = _parts(rec, kind)
        if kind == "kept":
            self.kept += 1
        else:
            self.dropped += 1
            self.dropped_by[drop_at] += 1
            self.duplicates.add(rec)
        self.names.count(stats)
        self._summarise(stats, kind, drop_at, None)
        self._reach(rec, stats, drop, drop_at)
        if len(self.first[kind]) < FIRST_SCREEN:
            item = self.item(rec, stats, drop, None)
            if item["images"]:
                self.first[kind].append(item)

    def late_names(self) -> set[str]:
        """The names to plot that got no sketch in the pass (a bare export's frequent names first seen
        after PLOT_CAP others): `add_values` takes their values in a second pass."""
        return set(self.names.plotted()) - set(self.stats)

    def add_values(self, rec: dict, kind: str, only: set[str]) -> None:
        """The values of the stats named in `only` of one kept or dropped record, read again."""
        stats, _, drop_at = _parts(rec, kind)
        self._summarise(stats, kind, drop_at, only)

    def _summarise(self, stats: dict, kind: str, drop_at, only: set[str] | None) -> None:
        """Add a record's values to the sketches of the stats to plot (`only` those, when given)."""
        for name, value in stats.items():
            if only is not None and name not in only:
                continue
            sk = self.stats.get(name)
            if sk is None:
                if only is None and not self.names.wants(name, len(self.stats)):
                    continue
                sk = self.stats[name] = {part: ValueSketch() for part in ("all", "kept", "dropped", "dropped_here")}
            if kind == "kept" or self.owner.get(name) != drop_at:
                parts = (sk["all"], sk[kind])
            else:  # dropped by the filter that computes this stat
                parts = (sk["all"], sk["dropped"], sk["dropped_here"])
            values = value if type(value) is list else [value]
            nums = [v for v in values if finite(v)]
            if len(nums) < len(values):
                self._left_out(name, values)
            for part in parts:
                part.extend(nums)

    def _left_out(self, name: str, values: list) -> None:
        rest = [v for v in values if not finite(v)]
        self.left_out[name] += len(rest)
        self.non_finite[name] += sum(type(v) in _NUMBER for v in rest)

    def _reach(self, rec: dict, stats: dict, drop, drop_at) -> None:
        """The record on the curves and galleries of each filter it reached."""
        for f, per_stat in self._plan:
            if drop_at is not None and drop_at < f.op_index:
                continue  # dropped before this filter: never reached it
            here = drop_at == f.op_index
            for stat, curve, sides in per_stat:
                value = stats.get(stat, _MISSING)
                if value is _MISSING:
                    continue
                curve.reached += 1
                extremes = _extremes(value)
                if extremes is None:
                    curve.free += 1
                    continue
                for red, sketch, gals in sides:
                    v = extremes[0] if red == "max" else extremes[1]
                    sketch.add(v)
                    for g in gals:
                        self._offer(g, v, rec, stats, drop, here)

    def _offer(self, g: Gallery, v: float, rec: dict, stats: dict, drop, dropped_here: bool) -> None:
        passes = v >= g.bound if g.is_min else v <= g.bound
        g.passing += passes
        # a sample this filter dropped for another bound, or one that misses this bound yet was
        # kept (any_or_all across stats), shows nothing about this bound
        if passes == dropped_here:
            return
        side = "kept" if passes else "dropped"
        distance = abs(v - g.bound)
        if g.wants(side, distance):
            g.offer(side, distance, self.item(rec, stats, drop, v))

    def item_of(self, rec: dict, kind: str) -> dict:
        """What the report shows of a kept, dropped or rejected record (a rejected one: the record it
        holds, and why it was rejected)."""
        if kind != "rejected":
            stats, drop, _ = _parts(rec, kind)
            return self.item(rec, stats, drop, None)
        sample = rec.get("record") if isinstance(rec.get("record"), dict) else {}
        item = self.item({**sample, POSITION_KEY: rec.get(POSITION_KEY)}, {}, None, None)
        return {**item, "reason": str(rec.get("reason", "")), "dropped_by": rec.get("op") or "an op"}

    def item(self, rec: dict, stats: dict, drop, value: float) -> dict:
        if self.to_sample is not None:
            try:
                rec = self.to_sample(rec)
            except (ValueError, TypeError, KeyError, AttributeError):  # not a record of that format: as it is
                pass
        text = rec.get(self.text_key)
        text = text if isinstance(text, str) else ""
        images = rec.get(self.image_key)
        images = [i for i in images if isinstance(i, str)][:4] if isinstance(images, list) else []
        return {"pos": rec.get(POSITION_KEY), "value": value,
                "text": text[:_TEXT_CHARS] + ("…" if len(text) > _TEXT_CHARS else ""),
                "images": images, "stats": {k: _short(v) for k, v in stats.items() if k in self.stats},
                "reason": drop.get("reason", "") if isinstance(drop, dict) else "",
                "dropped_by": drop.get("op", "") if isinstance(drop, dict) else ""}

    def finish(self, summary: dict | None = None) -> None:
        """Every record is in: keep the stats to plot only and bring their sketches up to date; count
        on each curve the samples that reached its filter and were rejected (the `summary`'s funnel)."""
        self._rejected_reaching(summary)
        self.duplicates.finish(summary)
        plotted = set(self.names.plotted())
        self.stats = {name: sk for name, sk in self.stats.items() if name in plotted}
        for sketches in self.stats.values():
            for s in sketches.values():
                s.flush()
        for curve in self.curves.values():
            for s in curve.sides.values():
                s.flush()

    def _rejected_reaching(self, summary: dict | None) -> None:
        """Rejected samples carry no stats; a filter reached them all the same: those its op or a later
        one rejected, per the summary's funnel (else the rejected records naming a filter once)."""
        ops = (summary or {}).get("ops")
        ops = ops if isinstance(ops, list) and all(isinstance(o, dict) for o in ops) else None
        order = [f.name for f in self.filters]
        for (index, _), curve in self.curves.items():
            if ops is not None and index < len(ops) and ops[index].get("name") == curve.op:
                n = sum(o.get("rejected") for o in ops[index:] if type(o.get("rejected")) is int)
            else:
                later = {f.name for f in self.filters if f.op_index >= index}
                n = sum(c for op, c in self.rejected_by_op.items() if op in later and order.count(op) == 1)
            curve.rejected = n
            curve.reached += n

    def add_rejected(self, rec: dict) -> None:
        self.rejected += 1
        code = str(rec.get("code") or "unknown")
        self.rejected_by_code[code] += 1
        self.rejected_by_op[rec.get("op")] += 1
        examples = self.rejection_examples.setdefault(code, [])
        if len(examples) < REJECTION_EXAMPLES:
            examples.append({"pos": rec.get(POSITION_KEY), "op": rec.get("op"), "reason": rec.get("reason", ""),
                             "where": ", ".join(str(x) for x in (rec.get("file"), rec.get("line") and f"line {rec['line']}") if x),
                             "record": _excerpt(rec.get("record", rec.get("raw")))})


def _parts(rec: dict, kind: str) -> tuple[dict, dict | None, int | None]:
    """A record's stats, its drop record and the index of the op that dropped it (if dropped)."""
    stats = rec.get(STATS_KEY)
    stats = stats if isinstance(stats, dict) else {}
    drop = rec.get(DROP_KEY) if kind == "dropped" else None
    return stats, drop, drop.get("op_index") if isinstance(drop, dict) else None


def _short(value):
    if isinstance(value, list):
        return [_short(v) for v in value[:6]] + (["…"] if len(value) > 6 else [])
    return value


def _excerpt(record) -> str:
    import json
    text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=False, default=str)
    return text[:200] + ("…" if len(text) > 200 else "")
