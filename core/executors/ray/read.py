"""Reading and parsing for the Ray executor (Ray tasks): JSON Lines files as their lines (the
datasource is in jsonl_source.py), lines and parquet rows as rows of the schema in ray_stages, bad
records rejected as the local reader rejects them."""
from __future__ import annotations

import os
import pickle
from typing import Iterator

import pyarrow as pa

from djx.core.run.chain import OpChain
from djx.core.recipe.context import POSITION_KEY
from djx.core.executors.ray.stages import AT, DATA, FILE, KIND, NBYTES, ORIG, RowKind
from djx.core.io.image_paths import path_writer
from djx.core.errors import DjxError
from djx.core.io.readers import ReadState, decode_line
from djx.core.io.record_limits import MAX_RECORD_BYTES, too_large
from djx.core.records import Item

MiB = 1 << 20
BLOCK_LINES, BLOCK_BYTES = 4096, 32 * MiB
_PICKLE = pickle.HIGHEST_PROTOCOL


def split_lines(f, at: int, limit: int) -> Iterator[tuple[bytes, int, int]]:
    """(line with its newline, its byte offset, its size if over `limit` else 0) for each line of
    the stream `f` from offset `at`. A line over the limit (as the local reader counts it: without
    its newline) is read past in chunks, never held whole: only its first 200 bytes come out."""
    tail, skipped = b"", None  # skipped: [offset, head, size so far] of a line over the limit
    while chunk := f.read(4 * MiB):
        if skipped is not None:
            cut = chunk.find(b"\n")
            if cut < 0:
                skipped[2] += len(chunk)
                continue
            start, head, size = skipped
            yield head, start, size + cut + 1
            at, chunk, skipped = start + size + cut + 1, chunk[cut + 1:], None
        *complete, tail = (tail + chunk).split(b"\n")
        for line in complete:
            yield (line[:200], at, len(line) + 1) if len(line) > limit else (line + b"\n", at, 0)
            at += len(line) + 1
        if len(tail) > limit:
            skipped, tail = [at, tail[:200], len(tail)], b""
    if skipped is not None:
        yield skipped[1], skipped[0], skipped[2]
    elif tail:
        yield (tail[:200], at, len(tail)) if len(tail) > limit else (tail, at, 0)


def file_index(files: list[str], first: int = 0) -> dict:
    return {os.path.normpath(os.path.abspath(f)): first + i for i, f in enumerate(files)}


def lookup_file(index: dict, path: str) -> int:
    """The dataset index of a file as Ray names it (with or without a scheme or leading slash)."""
    for prefix in ("file://", "local://"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    key = os.path.normpath(path if path.startswith("/") else "/" + path)
    if key not in index:
        raise RuntimeError(f"djx bug: Ray read {path!r}, which is not one of the dataset's files")
    return index[key]


def lines_table(lines: list, starts: list, over: list, file: int) -> pa.Table:
    return pa.table({"raw": pa.array(lines, pa.binary()), AT: pa.array(starts, pa.int64()),
                     "over": pa.array(over, pa.int64()), FILE: pa.array([file] * len(lines), pa.int32())})


def parse_lines(table: pa.Table, ctx, keep_orig: bool, max_record_bytes: int = MAX_RECORD_BYTES) -> pa.Table:
    """Lines -> rows. Items are made as core.reader makes them for local workers (raw text,
    `pending`) and parsed by the chain itself, so a bad line is rejected with the same reason."""
    raws = table.column("raw").to_pylist()
    files = table.column(FILE).to_pylist()
    starts = table.column(AT).to_pylist()
    over = table.column("over").to_pylist()
    rows = [i for i, raw in enumerate(raws) if over[i] or raw.strip()]
    items = []
    for j, i in enumerate(rows):
        if over[i]:
            text = decode_line(raws[i], starts[i])[0] + "..."
            error = too_large(f"the line at byte {starts[i]}", over[i], max_record_bytes)
        else:
            text, error = decode_line(raws[i], starts[i])
        items.append(Item(j, raw=text, pending=error is None, error=error, file=files[i]))
    out = _admit(items, rows, len(raws), ctx, keep_orig, [over[i] or len(r) for i, r in enumerate(raws)])
    return out.append_column(AT, table.column(AT)).append_column(FILE, table.column(FILE))


def parse_rows(table: pa.Table, ctx, keep_orig: bool, index: dict | None) -> pa.Table:
    """Parquet rows -> rows: records are the rows as dicts, as core.reader reads them. With
    several files (`index`), Ray's "path" column (include_paths) tells each row's file."""
    if index is None:
        files = [0] * table.num_rows
    else:
        files = [lookup_file(index, p) for p in table.column("path").to_pylist()]
        table = table.drop_columns(["path"])
    items = [Item(i, record=r, file=files[i]) for i, r in enumerate(table.to_pylist())]
    out = _admit(items, list(range(len(items))), len(items), ctx, keep_orig, [0] * len(items))
    return out.append_column(FILE, pa.array(files, pa.int32()))


def _admit(items: list, rows: list, n: int, ctx, keep_orig: bool, nbytes: list) -> pa.Table:
    """Reject what is not a sample (the chain's own rule, run with no ops); the rest is live."""
    kind, data, orig = [RowKind.BLANK.value] * n, [b""] * n, [b""] * n
    res = OpChain([], ctx, export_kept=not keep_orig).run(items)  # live samples: paths as read
    paths = path_writer(ctx, [])
    for s in res.kept:
        i = rows[s[POSITION_KEY]]
        kind[i], data[i] = RowKind.LIVE.value, pickle.dumps(s, _PICKLE)
        if keep_orig:  # a later rejection writes the input record, as the local executor does
            record = items[s[POSITION_KEY]].record
            orig[i] = pickle.dumps(paths.copy(record) if paths else record, _PICKLE)
    for rej in res.rejected:
        i = rows[rej.pos]
        kind[i], data[i] = RowKind.REJECTED.value, pickle.dumps(rej, _PICKLE)
    return pa.table({KIND: pa.array(kind, pa.string()), DATA: pa.array(data, pa.binary()),
                     ORIG: pa.array(orig, pa.binary()), NBYTES: pa.array(nbytes, pa.int64())})


def advance(state: ReadState, file: int, nbytes: int | None) -> None:
    """The reader position past one row of `file` (`nbytes`: its line's length, JSON Lines)."""
    if file != state.file:
        if file < state.file:
            raise DjxError(f"djx bug: Ray returned file {file} after file {state.file}")
        while state.file < file:  # the files between held no rows
            state.next_file()
    if nbytes is not None:
        state.lines += 1
        state.offset += nbytes
