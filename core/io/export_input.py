"""A djx export read back as a dataset by the name the run printed: its shards in order, and the
stats file beside it (`keep_stats_in_res_ds: false`) put back into its records.

With `keep_stats_in_res_ds: false` the export holds the input's keys only (training-ready); djx's
own keys of each kept sample (`__dj__stats__`, its position, the stats' provenance) go to the stats
file, one row per exported record in export order, with a digest of the record it belongs to.
Read back, a row is put back into its record only when the summary beside the export names that
stats file and its count, and the row's digest is the record's; the stats then face the same
provenance check (run/provenance.py) as stats carried inside records. Anything else is ignored,
with a warning saying why, and the stats are computed again.
"""
from __future__ import annotations

import json
import os
import re
from typing import Iterator

from djx.core.errors import DjxError
from djx.core.io.writers import FORMATS, existing_shards

def _summary_of(export: str) -> dict | None:
    from djx.core.io.outputs import OutputPaths
    try:
        with open(OutputPaths.for_export(export).summary, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and isinstance(summary.get("outputs"), dict) else None


def export_shards(path: str) -> list[str] | None:
    """The shards of a sharded export named by its logical name (which is no file), in order: those
    its summary lists, else those Data-Juicer's naming finds. None when `path` names no sharded
    export; a DjxError naming a missing shard."""
    if os.path.exists(path) or not path.lower().endswith(FORMATS):
        return None
    summary = _summary_of(path) or {}
    listed = summary.get("outputs", {}).get("export_files")
    if isinstance(listed, list) and listed and all(isinstance(f, str) for f in listed) \
            and os.path.abspath(summary["outputs"].get("export") or "") == os.path.abspath(path):
        folder = os.path.dirname(os.path.abspath(path))
        files = [os.path.join(folder, os.path.basename(f)) for f in listed]  # the folder may have moved
    else:
        files = existing_shards(path)
        if not files:
            return None
        n = int(re.search(r"-of-(\d+)\.\w+$", files[0]).group(1))
        from djx.core.io.writers import shard_names
        files = shard_names(path, n)
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise DjxError(f"dataset_path {path}: an export in {len(files)} shards, but shard {missing[0]} is missing"
                       + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return files


def stats_beside(path: str, files: list[str]) -> tuple[str | None, str | None]:
    """(the stats file to put back into the records of the export `path`, or None; a warning when
    a stats file is there but not used, saying why)."""
    from djx.core.io.outputs import OutputPaths
    if not path.lower().endswith(FORMATS) or os.path.isdir(path):
        return None, None
    stats = OutputPaths.for_export(path).stats
    if not os.path.isfile(stats):
        return None, None
    summary = _summary_of(path)
    if summary is None:
        return None, f"warning: {stats} not used: no djx summary beside {path} says djx wrote it for this export"
    outs = summary["outputs"]
    if os.path.basename(outs.get("stats") or "") != os.path.basename(stats) \
            or os.path.basename(outs.get("export") or "") != os.path.basename(path):
        return None, f"warning: {stats} not used: the summary beside {path} does not name it as this export's stats"
    rows = _count_lines(stats)
    if rows != summary.get("kept"):
        return None, (f"warning: {stats} not used: it holds {rows} stats rows, the summary says the export holds "
                      f"{summary.get('kept')} records")
    return stats, None


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def stats_rows(path: str, start: int = 0) -> Iterator[tuple[int, dict | None]]:
    """(index, row) of a stats file from row `start` on; a row that does not parse is None."""
    with open(path, "rb") as f:
        n = 0
        for line in f:
            if not line.strip():
                continue
            if n >= start:
                try:
                    row = json.loads(line)
                except ValueError:
                    row = None
                yield n, row if isinstance(row, dict) else None
            n += 1


def with_stats_rows(items: Iterator, path: str, start: int) -> Iterator:
    """Items read from an export (from its record `start` on), each with its row of the stats file."""
    rows = stats_rows(path, start)
    at, row = -1, None
    for item in items:
        while at < item.pos:
            at, row = next(rows, (item.pos, None))
        item.stats_row = row if at == item.pos else None
        yield item
