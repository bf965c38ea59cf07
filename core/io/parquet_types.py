"""The input's own column types for a parquet export.

A parquet export infers its column types from the records' Python values: a decimal128(5, 2)
column comes back decimal128(3, 2) (the precision its values need), a timestamp[ms] one
timestamp[us], large_binary binary, int32 int64. Given the input parquet files' schema, a column
whose inferred type is of the same kind as the input's (both decimals, both timestamps in the same
time zone, both binary, both integers, structs and lists of such) is written with the input's type;
one whose values no longer fit it (an op changed them) keeps the inferred type.
"""
from __future__ import annotations


def input_types(files: list[str] | None, json_columns) -> dict:
    """Column name to arrow type, from the first parquet file of `files` (its footer); {} for other
    inputs or a file that cannot be read (the reader says why where it matters). A djx output's
    JSON-text columns (`json_columns(parquet_file, path)`: writers.py) are left out: their values
    are decoded, not text."""
    import pyarrow.parquet as pq
    for path in files or []:
        if not path.lower().endswith(".parquet"):
            continue
        try:
            parquet = pq.ParquetFile(path)
            as_json = set(json_columns(parquet, path))
        except Exception:  # a DjxError from json_columns too
            return {}
        return {f.name: f.type for f in parquet.schema_arrow if f.name not in as_json}
    return {}


def same_kind(inferred, given) -> bool:
    """Whether `given` (the input's type) may replace `inferred` (the records' own) losing nothing
    but the detail inference cannot know (precision, unit, width, offsets)."""
    import pyarrow as pa
    t = pa.types
    if inferred == given or t.is_null(inferred):
        return True
    if t.is_struct(inferred) and t.is_struct(given):
        names = [inferred.field(i).name for i in range(inferred.num_fields)]
        return (names == [given.field(i).name for i in range(given.num_fields)]
                and all(same_kind(inferred.field(i).type, given.field(i).type) for i in range(len(names))))
    lists = (t.is_list, t.is_large_list, t.is_fixed_size_list)
    if any(f(inferred) for f in lists) and any(f(given) for f in lists):
        return same_kind(inferred.value_type, given.value_type)
    if t.is_timestamp(inferred) and t.is_timestamp(given):
        return inferred.tz == given.tz
    kinds = ((t.is_binary, t.is_large_binary, t.is_fixed_size_binary), (t.is_string, t.is_large_string),
             (t.is_integer,), (t.is_floating,), (t.is_decimal,), (t.is_date,), (t.is_time,), (t.is_duration,))
    return any(any(f(inferred) for f in kind) and any(f(given) for f in kind) for kind in kinds)
