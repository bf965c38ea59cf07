"""Reading and parsing for the Ray executor (Ray tasks): JSON Lines files as their lines, lines
and parquet rows as rows of the schema in ray_stages, bad records rejected as the local reader
rejects them."""
from __future__ import annotations

import os
import pickle

import pyarrow as pa

from djx.core.run.chain import OpChain
from djx.core.recipe.context import POSITION_KEY
from djx.core.executors.ray.stages import AT, DATA, FILE, KIND, NBYTES, ORIG, RowKind
from djx.core.io.image_paths import path_writer
from djx.core.io.readers import decode_line
from djx.core.records import Item

MiB = 1 << 20
BLOCK_LINES, BLOCK_BYTES = 4096, 32 * MiB
_PICKLE = pickle.HIGHEST_PROTOCOL


def _file_datasource():
    from ray.data.datasource import FileBasedDatasource
    return FileBasedDatasource


class JsonLines(_file_datasource()):
    """A JSON Lines file as its lines, split on b"\\n" only and kept as bytes with their newline:
    what the local reader sees. (read_text splits with str.splitlines, which also breaks lines at
    \\r, U+0085 and U+2028, all valid inside a JSON line, and fails the whole file on bad UTF-8.)"""

    def __init__(self, files: list[str], start: int = 0, first: int = 0, **kwargs):
        super().__init__(files, **kwargs)
        self.start = start  # a resumed run's read offset (a line start) in its first file
        self.first = first  # the dataset index of files[0] (a resumed run skips finished files)
        self.index = file_index(files, first)

    def _read_stream(self, f, path: str):
        file = lookup_file(self.index, path)
        skip = self.start if file == self.first else 0
        at = skip
        while skip > 0:  # a sequential stream: read past the part already done
            got = len(f.read(min(skip, 4 * MiB)))
            if not got:
                return
            skip -= got
        tail, lines, starts, size = b"", [], [], 0
        while chunk := f.read(4 * MiB):
            *complete, tail = (tail + chunk).split(b"\n")
            for line in complete:
                lines.append(line + b"\n")
                starts.append(at)
                at += len(line) + 1
                size += len(line) + 1
                if len(lines) >= BLOCK_LINES or size >= BLOCK_BYTES:
                    yield _lines_table(lines, starts, file)
                    lines, starts, size = [], [], 0
        if tail:
            lines.append(tail)
            starts.append(at)
        if lines:
            yield _lines_table(lines, starts, file)


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


def _lines_table(lines: list, starts: list, file: int) -> pa.Table:
    return pa.table({"raw": pa.array(lines, pa.binary()), AT: pa.array(starts, pa.int64()),
                     FILE: pa.array([file] * len(lines), pa.int32())})


def parse_lines(table: pa.Table, ctx, keep_orig: bool) -> pa.Table:
    """Lines -> rows. Items are made as core.reader makes them for local workers (raw text,
    `pending`) and parsed by the chain itself, so a bad line is rejected with the same reason."""
    raws = table.column("raw").to_pylist()
    files = table.column(FILE).to_pylist()
    starts = table.column(AT).to_pylist()
    rows = [i for i, raw in enumerate(raws) if raw.strip()]
    items = []
    for j, i in enumerate(rows):
        text, error = decode_line(raws[i], starts[i])
        items.append(Item(j, raw=text, pending=error is None, error=error, file=files[i]))
    out = _admit(items, rows, len(raws), ctx, keep_orig, [len(r) for r in raws])
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
