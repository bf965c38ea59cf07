"""Format writers: turn a run's JSON Lines part file into the export's format when a run finishes.

A run always appends JSON Lines to its part files (crash-safe, resumable by byte length); only the
finish writes the final format, into a temporary file that is renamed into place, so a finish
stopped at any instant is simply redone. Formats follow the export path's suffix, as in
Data-Juicer: `.jsonl`, `.json` (one JSON array, written record by record) and `.parquet`.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
from typing import Callable, Iterable, Iterator

from djx.core.errors import DjxError
from djx.core.io.json_values import loads, tagged
from djx.core.io.private_files import new_file_beside, remove_leftover_temps

FORMATS = (".jsonl", ".json", ".parquet")
PARQUET_JSON_COLUMNS = b"djx.json_columns"  # parquet metadata: columns stored as JSON text
_CHUNK = 2048


def export_format(path: str) -> str:
    """The format suffix of an export path (".jsonl", ".json" or ".parquet")."""
    for suffix in FORMATS:
        if path.lower().endswith(suffix):
            return suffix
    raise DjxError(f"export_path: {path!r} must end in .jsonl, .json or .parquet (the export's format)")


def analysis_dir(export: str) -> str:
    """Where the analysis of an export goes unless told: `<stem>.analysis/` next to it."""
    folder, name = os.path.split(os.path.abspath(export))
    return os.path.join(folder, name[:-len(export_format(name))] + ".analysis")


def dumps(obj) -> str:
    """JSON text, with values JSON cannot hold (bytes, timestamps, decimals: io/json_values.py)
    as djx's one-key objects, which `read_part` turns back into the values (a JSON export keeps
    them so: a run exporting parquet columns of such values as JSON is refused before any work)."""
    return json.dumps(obj, ensure_ascii=False, default=tagged)


def encode_line(obj) -> bytes:
    """One JSON Lines line, newline included, as the part files hold it (workers encode, the
    parent appends the bytes)."""
    return (dumps(obj) + "\n").encode("utf-8")


def write_records(records: Callable[[], Iterable[dict]], dest: str, fmt: str, like: dict | None = None) -> None:
    """Write the records (a callable that iterates them, called again when a format needs a second
    pass) to `dest` in `fmt`, atomically: a new temporary file (a random name, never one that
    someone could have planted a link at) renamed into place."""
    remove_leftover_temps(dest)  # a killed finish's (the run's lock keeps out any other writer)
    fd, tmp = new_file_beside(dest)
    try:
        if fmt == ".parquet":
            with os.fdopen(fd, "wb") as f:
                _write_parquet(records, f, dest, like or {})
                f.flush()
                os.fsync(f.fileno())
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                if fmt == ".json":
                    _write_json_array(records(), f)
                else:
                    for rec in records():
                        f.write(dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_part(part: str, files: list[str], fmt: str, stats_path: str | None = None,
               keep_stats: bool = False, like: list[str] | None = None) -> None:
    """Write a part file (JSON Lines) as `files` in `fmt`: one file, or contiguous shards as even
    as the count allows. With `stats_path`, the stats and djx's other keys leave the records for
    that JSON Lines file (one row per kept sample, in export order: stats_rows.split_record), the
    stats staying in the records too with `keep_stats`. `like`: the input files, whose parquet
    column types a parquet export keeps (io/parquet_types.py)."""
    from djx.core.io.parquet_types import input_types
    types = input_types(like, json_columns) if fmt == ".parquet" else {}
    if stats_path:  # djx's keys leave the records for the stats file (export_input.py)
        from djx.core.io.stats_rows import split_record
        write_records(lambda: (split_record(r)[1] for r in read_part(part)), stats_path, ".jsonl")

    def rows(start=0, end=None):
        for r in read_part(part, start, end):
            yield split_record(r, keep_stats)[0] if stats_path else r
    size, extra = divmod(count_records(part), len(files))
    start = 0
    for i, name in enumerate(files):
        end = start + size + (1 if i < extra else 0)
        write_records(lambda start=start, end=end: rows(start, end), name, fmt,
                      **({"like": types} if types else {}))  # three arguments as before when no like
        start = end


def count_records(part: str) -> int:
    with open(part, "rb") as f:
        return sum(1 for line in f if line.strip())


def read_part(part: str, start: int = 0, end: int | None = None) -> Iterator[dict]:
    """The records of a part file (JSON Lines written by this run), from record `start` to `end`."""
    with open(part, "rb") as f:
        lines = (line for line in f if line.strip())
        for line in itertools.islice(lines, start, end):
            yield loads(line)


def _write_json_array(records: Iterable[dict], f) -> None:
    f.write("[")
    sep = "\n"
    for rec in records:
        f.write(sep + dumps(rec))
        sep = ",\n"
    f.write("\n]\n")


def _chunks(records: Iterable[dict]) -> Iterator[list[dict]]:
    chunk = []
    for rec in records:
        chunk.append(rec)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write_parquet(records: Callable[[], Iterable[dict]], f, dest: str, like: dict) -> None:
    """Two passes: infer one arrow type per top-level field over every record (fields whose values
    share no type, e.g. a list here and a string there, become JSON text, named in the file's
    metadata so readers decode them), then write chunk by chunk. A field's type in `like` (the
    input's) replaces an inferred type of its kind, unless the values do not fit it."""
    import pyarrow as pa
    from djx.core.io.parquet_types import same_kind
    columns, as_json = _parquet_schema(records)
    inferred = dict(columns)
    exact = {k for k, t in like.items() if k in columns and k not in as_json and same_kind(columns[k], t)}
    columns.update({k: like[k] for k in exact})
    while True:
        try:
            f.seek(0)
            f.truncate()
            _write_parquet_pass(records, f, columns, as_json)
            return
        except _ColumnConflict as c:  # a value the type cannot hold: the inferred type, else JSON text
            if c.name in exact:
                exact.discard(c.name)
                columns[c.name] = inferred[c.name]
            else:
                as_json.add(c.name)
        except pa.ArrowException as e:  # a type parquet cannot store: nested fields as JSON text
            nested = {k for k, t in columns.items() if pa.types.is_nested(t)} - as_json
            if not nested:
                raise DjxError(f"cannot write {dest} as parquet ({e}); the processed samples stay in "
                               f"the run's state folder, but this export cannot be finished as parquet: run again "
                               f"with --restart and an export_path ending in .jsonl") from None
            as_json |= nested


class _ColumnConflict(Exception):
    def __init__(self, name: str):
        self.name = name


def _parquet_schema(records: Callable[[], Iterable[dict]]) -> tuple[dict, set]:
    import pyarrow as pa
    types: dict = {}
    as_json: set = set()
    for chunk in _chunks(records()):
        for rec in chunk:
            for k in rec:
                types.setdefault(k, pa.null())
        for k in types:
            if k in as_json:
                continue
            try:
                values = [rec.get(k) for rec in chunk]
                t = _with_nanoseconds(pa.array(values).type, values)
                types[k] = pa.unify_schemas([pa.schema([(k, types[k])]), pa.schema([(k, t)])],
                                            promote_options="permissive").field(k).type
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                as_json.add(k)
    as_json.update(k for k, t in types.items() if not _parquet_writable(t))
    return types, as_json


def _with_nanoseconds(t, values: list):
    """A timestamp[us] column whose values are pandas Timestamps (read from a timestamp[ns]
    column) as timestamp[ns], which keeps their nanoseconds."""
    import pyarrow as pa
    if pa.types.is_timestamp(t) and t.unit == "us" and any(hasattr(v, "nanosecond") for v in values):
        return pa.timestamp("ns", t.tz)
    return t


def _parquet_writable(t) -> bool:
    """Whether parquet can store the arrow type: not a struct without fields (an empty dict), at
    any depth."""
    import pyarrow as pa
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(_parquet_writable(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _parquet_writable(t.value_type)
    return True


def _write_parquet_pass(records, f, types: dict, as_json: set) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pa.schema([(k, pa.string() if k in as_json else t) for k, t in types.items()],
                       metadata={PARQUET_JSON_COLUMNS: json.dumps(sorted(as_json)).encode()})
    with pq.ParquetWriter(f, schema) as writer:
        for chunk in _chunks(records()):
            arrays = []
            for k in types:
                values = [rec.get(k) for rec in chunk]
                if k in as_json:
                    arrays.append(pa.array([None if v is None else dumps(v) for v in values], pa.string()))
                    continue
                try:
                    arrays.append(pa.array(values, types[k]))
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    raise _ColumnConflict(k) from None
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def shard_names(dest: str, n: int) -> list[str]:
    """Data-Juicer's shard names: `<stem>-<i>-of-<n><suffix>`, numbers zero-padded to one digit
    more than n has, i from 0."""
    folder, name = os.path.split(dest)
    fmt = export_format(name)
    stem = name[:-len(fmt)]
    width = len(str(n)) + 1
    return [os.path.join(folder, f"{stem}-{i:0{width}d}-of-{n:0{width}d}{fmt}") for i in range(n)]


def is_shard_of(dest: str, candidate: str) -> bool:
    """Whether `candidate` (a file name) is a shard of `dest`, by Data-Juicer's naming."""
    import re
    name = os.path.basename(dest)
    fmt = export_format(name)
    pattern = re.escape(name[:-len(fmt)]) + r"-(\d+)-of-(\d+)" + re.escape(fmt)
    m = re.fullmatch(pattern, candidate)
    return bool(m) and len(m.group(1)) == len(m.group(2))


def existing_shards(dest: str) -> list[str]:
    """The shard files of `dest` that exist, in order."""
    folder = os.path.dirname(dest) or "."
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if is_shard_of(dest, n))


def json_columns(parquet_file, path: str = "the parquet file") -> list[str]:
    """The columns a djx parquet output stores as JSON text (none for other parquet files)."""
    meta = parquet_file.schema_arrow.metadata or {}
    try:
        names = json.loads(meta.get(PARQUET_JSON_COLUMNS, b"[]"))
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        shown = meta.get(PARQUET_JSON_COLUMNS, b"")[:80].decode("utf-8", "replace")
        raise DjxError(f"{path}: its parquet metadata {PARQUET_JSON_COLUMNS.decode()} must be a list of column "
                       f"names (djx writes it so), got {shown!r}: remove that metadata key or write the file again")
    return names


def decode_json_columns(row: dict, columns: list[str]) -> dict:
    """A parquet row with its JSON-text columns decoded (a value that does not decode stays text)."""
    for k in columns:
        if isinstance(row.get(k), str):
            try:
                row[k] = loads(row[k])
            except ValueError:
                pass
    return row
