"""Reading a run's outputs back, whatever their format: JSON Lines, a JSON array, parquet, an export
cut into shards, and an export whose stats were written to the stats file beside it
(`keep_stats_in_res_ds: false`). `djx check` (and anything else that reads outputs) goes through
`iter_output`, so every output format is checked the same way."""
from __future__ import annotations

import json
import os
from typing import Iterator

from djx.core.recipe.context import POSITION_KEY
from djx.core.errors import CheckError, DjxError
from djx.core.io.export_input import export_shards
from djx.core.io.stats_rows import put_back
from djx.core.io.writers import FORMATS, decode_json_columns, json_columns


def export_files(export: str) -> list[str]:
    """The files holding an export: the file itself, or its shards (Data-Juicer's naming)."""
    if os.path.exists(export):
        return [export]
    try:
        return export_shards(export) or []
    except DjxError as e:
        raise CheckError(str(e)) from None


def stats_file(export: str) -> str | None:
    """The stats file beside an export (`<stem>_stats.jsonl`), when there is one."""
    lower = export.lower()
    for fmt in FORMATS:
        if lower.endswith(fmt):
            path = export[:-len(fmt)] + "_stats.jsonl"
            return path if os.path.exists(path) else None
    return None


def iter_output(path: str) -> Iterator[tuple[int, dict]]:
    """(index, record) of every record of an output (its shards in order); a training-ready record
    (no position: keep_stats_in_res_ds false, a LLaVA export) gets djx's keys back from its row of
    the stats file beside the export, which must be its own (stats_rows.put_back). Damage is a
    CheckError naming the file."""
    files = export_files(path)
    stats = stats_file(path)
    records = (rec for f in files for rec in _iter_file(f))
    if stats is None:
        yield from enumerate(records)
        return
    side, n, used = _iter_file(stats), -1, False
    for n, rec in enumerate(records):
        extra = next(side, None)
        if POSITION_KEY not in rec:  # a training-ready record: djx's keys are beside
            if extra is None:
                raise CheckError(f"{stats}: no row for the export's record {n + 1}: the stats file is cut short, "
                                 f"or does not belong to this export")
            used, (rec, matched) = True, put_back(rec, extra)
            if not matched:
                raise CheckError(f"{stats}: row {n + 1} holds the stats of another record than the export's record "
                                 f"{n + 1}: the stats file does not belong to this export")
        yield n, rec
    if used and next(side, None) is not None:
        raise CheckError(f"{stats}: more rows than the export's {n + 1} record(s): the stats file does not "
                         f"belong to this export, or records were removed from it")


def _iter_file(path: str) -> Iterator[dict]:
    lower = path.lower()
    if lower.endswith(".parquet"):
        yield from _iter_parquet(path)
    elif lower.endswith(".json"):
        yield from _iter_json_array(path)
    else:
        yield from iter_jsonl_range(path)


def jsonl_alone(path: str) -> bool:
    """Whether `path` is one JSON Lines file whose records need nothing beside them (no shards, no
    stats file): one that a check may read in byte ranges (iter_jsonl_range)."""
    return (os.path.isfile(path) and stats_file(path) is None
            and not path.lower().endswith((".parquet", ".json")))


def iter_jsonl_range(path: str, start: int = 0, end: int | None = None) -> Iterator[dict]:
    """The records of the lines that start in [start, end) of a JSON Lines file (all of it by
    default), `start` a line's start. A line that does not parse (a file cut off or edited) is a
    CheckError naming the file and its line (from the file's start) or its byte (from a piece's)."""
    with open(path, "rb") as f:
        f.seek(start)
        at = start
        for n, line in enumerate(f, 1):
            if end is not None and at >= end:
                return
            at += len(line)
            if line.strip():
                try:
                    yield json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                    where = f"line {n}" if start == 0 else f"a line near byte {at}"
                    raise CheckError(f"{path}, {where}: not valid JSON ({e}); the file is damaged (cut off "
                                     f"mid-line?) and cannot be checked") from None


def _iter_json_array(path: str) -> Iterator[dict]:
    from djx.core.io.readers import ReadState, read_files
    try:
        for item in read_files([path], ReadState(), parse=True):
            if item.error:
                raise CheckError(f"{path}, record {item.pos + 1}: {item.error}; the file is damaged")
            yield item.record
    except CheckError:
        raise
    except DjxError as e:
        raise CheckError(f"{path}: {e}") from None


def _iter_parquet(path: str) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        f = pq.ParquetFile(path)
        as_json = json_columns(f)
        for batch in f.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                yield decode_json_columns(row, as_json)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CheckError(f"{path}: not a readable parquet file ({e}); the file is damaged") from None


def record_bound(path: str | None) -> int:
    """At most how many records an output holds, read cheaply (JSON Lines: its line breaks; parquet:
    its metadata; a JSON array: a record takes at least 2 bytes); 0 when it is not there."""
    if not path:
        return 0
    bound = 0
    for f in export_files(path):
        lower = f.lower()
        if lower.endswith(".parquet"):
            import pyarrow.parquet as pq
            try:
                bound += pq.ParquetFile(f).metadata.num_rows
            except Exception:  # noqa: BLE001  damaged: reading it says so
                bound += os.path.getsize(f)
        elif lower.endswith(".json"):
            bound += os.path.getsize(f) // 2 + 1
        else:
            with open(f, "rb") as fh:
                bound += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b"")) + 1
    return bound
