"""Parquet rows, read in reads bounded in bytes, as JSON Lines lines are.

A parquet file's footer says how many bytes a row group takes encoded, not decoded: a dictionary
or a run of repeated values turns a few KB of zstd into GBs of rows. So a row group is read in
reads of k rows, k measured on the rows themselves: the first read takes one row, and the next
reads as many as fit in `max_read_bytes` at the size rows have had (a power of two, at most
READ_ROWS). Rows larger than planned make k smaller; pyarrow reads a row group with one k, so a
new k reads the group again from its start up to the rows already taken (at most a few times per
group: k only shrinks after it first grows). A row over `max_record_bytes` is rejected as a JSON
line of that size is; it is decoded once by Arrow, to be measured, and never turned into Python.
"""
from __future__ import annotations

import json
from typing import Iterator

from djx.core.errors import DjxError
from djx.core.io.record_limits import MAX_DEPTH, record_problem, too_deep, too_large
from djx.core.records import Item

READ_ROWS = 64  # rows one read takes at most (reading more at once is no faster)


def read_parquet(path: str, state, max_read_bytes: int, max_record_bytes: int) -> Iterator[Item]:
    import pyarrow as pa
    try:
        yield from _read_parquet_rows(path, state, max_read_bytes, max_record_bytes)
    except (pa.ArrowException, OSError) as e:
        raise DjxError(f"{path}: not a readable parquet file ({e}); is it damaged or cut off?") from None


def _read_parquet_rows(path: str, state, max_read_bytes: int, max_record_bytes: int) -> Iterator[Item]:
    import pyarrow.parquet as pq
    from djx.core.io.writers import decode_json_columns, json_columns
    index = state.file_start  # the dataset position of the file's next row
    parquet = pq.ParquetFile(path)
    as_json = json_columns(parquet, path)  # a djx parquet output's fields stored as JSON text
    for group in range(parquet.metadata.num_row_groups):
        n = parquet.metadata.row_group(group).num_rows
        if index + n <= state.records:  # a resumed run: read past it unread
            index += n
            continue
        done = max(state.records - index, 0)
        index += done
        for batch, size in _reads(parquet, group, done, max_read_bytes, max_record_bytes):
            if batch is None:
                reason = too_large(f"row {index - state.file_start} of the file", size, max_record_bytes)
                items = [Item(index, error=reason, file=state.file, size=size)]
            else:
                rows = batch.to_pylist()
                items = [_item(index + i, row, as_json, decode_json_columns, state.file, size // len(rows))
                         for i, row in enumerate(rows)]
                items[-1].size += size % len(rows)
            for item in items:
                state.records = item.pos + 1
                yield item
            index += len(items)


def _item(pos: int, row: dict, as_json: list[str], decode_json_columns, file: int, size: int) -> Item:
    deep = _too_deep_json(row, as_json)
    if deep:
        return Item(pos, error=deep, raw=None, file=file, size=size)
    return Item(pos, record=decode_json_columns(row, as_json), file=file, size=size)


def _reads(parquet, group: int, done: int, max_read_bytes: int, max_record_bytes: int):
    """(rows, their decoded bytes) of row group `group` from its row `done` on, in reads sized as
    the module says; (None, bytes) for a row over max_record_bytes, which is not handed on."""
    meta = parquet.metadata.row_group(group)
    n, k, grown = meta.num_rows, 1, False
    if n == 1 and meta.total_byte_size > max_record_bytes:  # one row, too large even encoded
        yield None, meta.total_byte_size
        return
    while done < n:
        start, want = 0, k
        for batch in parquet.iter_batches(batch_size=k, row_groups=[group], use_threads=False):
            start, end = start + batch.num_rows, start
            if start <= done:  # taken before k changed
                continue
            if end < done:
                batch = batch.slice(done - end)
            size = batch.nbytes
            if size > max_record_bytes and batch.num_rows > 1:
                want = 1  # one of these rows may be over the limit: measure each alone
                break
            yield (None if size > max_record_bytes else batch), size
            done += batch.num_rows
            want = _rows_that_fit(size / batch.num_rows, max_read_bytes)
            if want < k or (want > k and not grown):
                break
        else:
            if done < n:
                raise DjxError(f"row group {group} holds fewer rows than its metadata says ({n})")
        if done < n:
            grown = grown or want > k
            k = want


def _rows_that_fit(row_bytes: float, max_read_bytes: int) -> int:
    """Rows of `row_bytes` that fit in max_read_bytes: a power of two from 1 to READ_ROWS."""
    fit = max(1, min(READ_ROWS, int(max_read_bytes // max(row_bytes, 1))))
    return 1 << (fit.bit_length() - 1)


def _too_deep_json(row: dict, columns: list[str]) -> str | None:
    """Why a row's JSON-text column nests deeper than a JSON Lines record may (None: it does not)."""
    for k in columns:
        v = row.get(k)
        if isinstance(v, str) and v.count("[") + v.count("{") > MAX_DEPTH:
            try:
                problem = record_problem(json.loads(v), v)
            except RecursionError:
                problem = too_deep()
            except ValueError:
                continue  # not JSON: the column stays text, as decode_json_columns leaves it
            if problem:
                return f"column {k!r}: {problem}"
    return None


def json_export_problem(files: list[str]) -> str | None:
    """Why a JSON export of these parquet files cannot hold their values (None: it can): the first
    column whose type (at any depth) is binary, a timestamp, date, time, duration or decimal. Read
    from the files' footers, before any work."""
    import pyarrow.parquet as pq
    for path in files:
        if not path.lower().endswith(".parquet"):
            continue
        try:
            schema = pq.read_schema(path)
        except Exception:  # a damaged file: the reader says so with its own message when it gets there
            continue
        for field in schema:
            what = _not_json(field.type)
            if what:
                return (f"column {field.name!r} of {path} is {field.type} ({what}), which JSON cannot hold: "
                        f"use an export_path ending in .parquet (it keeps the column's values and type), or "
                        f"write the dataset without that column")
    return None


def _not_json(t) -> str | None:
    """What in an arrow type JSON cannot hold, in words (None: nothing)."""
    import pyarrow as pa
    checks = ((pa.types.is_binary, "binary"), (pa.types.is_large_binary, "binary"),
              (pa.types.is_fixed_size_binary, "binary"), (pa.types.is_timestamp, "a timestamp"),
              (pa.types.is_date, "a date"), (pa.types.is_time, "a time of day"),
              (pa.types.is_duration, "a duration"), (pa.types.is_interval, "an interval"),
              (pa.types.is_decimal, "a decimal"))
    for check, what in checks:
        if check(t):
            return what
    if pa.types.is_map(t):
        inner = [t.key_type, t.item_type]
    elif pa.types.is_struct(t):
        inner = [t.field(i).type for i in range(t.num_fields)]
    else:  # a list's or a dictionary's values
        inner = [t.value_type] if hasattr(t, "value_type") else []
    return next((what for what in map(_not_json, inner) if what), None)
