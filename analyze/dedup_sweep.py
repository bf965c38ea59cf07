"""How many samples each threshold of a deduplicator would remove, from a finished run's outputs:
for the ops that offer `threshold_sweep` (image_semantic_deduplicator). `djx analyze` prints the
table and writes it to `<op>.<index>.thresholds.csv`; the run's own threshold is marked."""
from __future__ import annotations

import csv
import os
from typing import Iterator

from djx.analyze.files import replacing
from djx.analyze.outputs import iter_records
from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY


def reached(paths, k: int, stat: str) -> Iterator[tuple[int, dict]]:
    """(position, stats) of every written sample that op k saw with its stat: the kept ones, and
    the dropped and rejected ones that an op at or after k set aside (an earlier op's are not its)."""
    for path, kind in ((paths.export, "kept"), (paths.dropped, "dropped"), (paths.rejected, "rejected")):
        for rec in iter_records(path):
            stats = rec.get(STATS_KEY)
            if not isinstance(stats, dict) or not isinstance(stats.get(stat), str):
                continue
            where = rec.get(DROP_KEY) if kind == "dropped" else rec
            op_index = where.get("op_index") if isinstance(where, dict) and kind != "kept" else None
            if isinstance(rec.get(POSITION_KEY), int) and (op_index is None or op_index >= k):
                yield rec[POSITION_KEY], stats


def threshold_sweeps(ops, paths, out_dir: str, log=print) -> list[dict]:
    """One row per (op, threshold): op, threshold, samples seen, removed; printed and written."""
    rows = []
    for k, op in enumerate(ops or ()):
        if not hasattr(op, "threshold_sweep"):
            continue
        seen = [0]

        def counted():
            for sample in reached(paths, k, op.stats_keys[0]):
                seen[0] += 1
                yield sample
        removed = op.threshold_sweep(counted())
        name, total = op.name or type(op).__name__, seen[0]
        lines = [f"{name} (process[{k}]): samples each threshold would remove, of {total} it saw"]
        for t, n in sorted(removed.items()):
            rows.append({"op": name, "op_index": k, "threshold": t, "seen": total, "removed": n})
            mark = "  <- this run" if abs(t - op.threshold) < 1e-9 else ""
            lines.append(f"  threshold {t:.2f}: {n:>8} ({n / max(1, total):.1%}){mark}")
        log("\n".join(lines))
        with replacing(os.path.join(out_dir, f"{name}.{k}.thresholds.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["op", "op_index", "threshold", "seen", "removed"])
            writer.writeheader()
            writer.writerows(r for r in rows if r["op_index"] == k)
    return rows
