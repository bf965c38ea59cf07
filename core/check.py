"""Output checks, run after every run and by `djx check`.

Stats completeness: a kept sample carries every stat of every filter; a dropped sample carries the
stats of every filter up to and including the one that dropped it; every value is a finite number
(or a list of them, non-empty when the sample has images). Accounting: input = kept + dropped +
rejected and every input position appears exactly once across the three files.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from djx.core.context import DROP_KEY, POSITION_KEY, STATS_KEY

MAX_LISTED = 10


@dataclass
class CheckReport:
    problems: dict = field(default_factory=dict)   # description -> [sample positions]
    counts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, what: str, pos) -> None:
        self.problems.setdefault(what, []).append(pos)

    def describe(self) -> str:
        if self.ok:
            return f"check passed: {self.counts}"
        lines = ["check FAILED:"]
        for what, positions in self.problems.items():
            shown = ", ".join(str(p) for p in positions[:MAX_LISTED])
            more = f" and {len(positions) - MAX_LISTED} more" if len(positions) > MAX_LISTED else ""
            lines.append(f"  {what}: {len(positions)} sample(s), positions {shown}{more}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "counts": self.counts,
                "problems": {k: {"samples": len(v), "positions": v[:MAX_LISTED]}
                             for k, v in self.problems.items()}}


def _bad_value(value, has_images: bool) -> str | None:
    if isinstance(value, bool) or value is None:
        return "missing" if value is None else None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else "non-finite"
    if isinstance(value, list):
        if not value and has_images:
            return "empty although the sample has images"
        for v in value:
            if isinstance(v, list):
                bad = _bad_value(v, False)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                bad = None if math.isfinite(v) else "non-finite"
            else:
                bad = f"not a number ({v!r})"
            if bad:
                return bad
        return None
    if isinstance(value, str):
        return None
    return f"of unexpected type {type(value).__name__}"


def _iter_jsonl(path: str):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                yield n, json.loads(line)


def check_outputs(kept_path: str, dropped_path: str | None, rejected_path: str | None,
                  filters: list[tuple[str, tuple[str, ...]]], image_key: str = "images",
                  input_count: int | None = None, dropped_count: int | None = None) -> CheckReport:
    """Check the three output files against the op list [(op name, stats keys), ...].

    Without a dropped file (export_dropped: false), `dropped_count` (from the summary) stands in
    for it in the count check."""
    report = CheckReport()
    index_of = {}
    for i, (name, _) in enumerate(filters):
        index_of.setdefault(name, i)
    seen = bytearray(input_count or 0)
    counts = {"kept": 0, "dropped": 0, "rejected": 0}

    def mark(pos, kind):
        if not isinstance(pos, int) or pos < 0:
            report.add(f"{kind} record without a valid {POSITION_KEY}", pos)
            return
        if input_count is not None:
            if pos >= input_count:
                report.add("position beyond the input count", pos)
            elif seen[pos]:
                report.add("sample appears more than once across the outputs", pos)
            else:
                seen[pos] = 1

    def check_stats(sample, upto: int, kind: str):
        stats = sample.get(STATS_KEY)
        pos = sample.get(POSITION_KEY)
        has_images = bool(sample.get(image_key))
        for i, (name, keys) in enumerate(filters):
            if i > upto:
                break
            for k in keys:
                if not isinstance(stats, dict) or k not in stats:
                    report.add(f"{kind} sample missing stat {k!r} of op {name}", pos)
                    continue
                bad = _bad_value(stats[k], has_images)
                if bad:
                    report.add(f"{kind} sample has stat {k!r} of op {name} {bad}", pos)

    for _, sample in _iter_jsonl(kept_path):
        counts["kept"] += 1
        mark(sample.get(POSITION_KEY), "kept")
        check_stats(sample, len(filters) - 1, "kept")
    if dropped_path and os.path.exists(dropped_path):
        for _, sample in _iter_jsonl(dropped_path):
            counts["dropped"] += 1
            mark(sample.get(POSITION_KEY), "dropped")
            drop = sample.get(DROP_KEY) or {}
            upto = drop.get("op_index", index_of.get(drop.get("op"), -1))
            if not isinstance(upto, int) or upto < 0 or upto >= len(filters) \
                    or filters[upto][0] != drop.get("op"):
                report.add(f"dropped sample without a valid {DROP_KEY} op", sample.get(POSITION_KEY))
                continue
            check_stats(sample, upto, "dropped")
    else:
        counts["dropped"] = dropped_count
    if rejected_path and os.path.exists(rejected_path):
        for _, rec in _iter_jsonl(rejected_path):
            counts["rejected"] += 1
            mark(rec.get(POSITION_KEY), "rejected")
            if not rec.get("reason"):
                report.add("rejected record without a reason", rec.get(POSITION_KEY))
    if input_count is not None:
        counts["input"] = input_count
        if counts["dropped"] is not None:
            total = counts["kept"] + counts["dropped"] + counts["rejected"]
            if total != input_count:
                report.add(f"count mismatch: input {input_count} != kept {counts['kept']} + dropped "
                           f"{counts['dropped']} + rejected {counts['rejected']} = {total}", -1)
        if counts["dropped"] is not None and dropped_path and os.path.exists(dropped_path):
            start = 0
            while (p := seen.find(0, start)) != -1:
                report.add("input sample missing from every output", p)
                start = p + 1
    report.counts = counts
    return report
