"""Values JSON cannot hold, kept exactly between the reader and the export.

A parquet row can hold bytes (a `binary` column, Hugging Face's Image struct's `bytes`),
timestamps, dates, times, durations and decimals. A run's part files are JSON Lines, so such a value
is written there as a one-key object naming its type: `{"__djx__value_binary__": "<base64>"}`,
`{"__djx__value_timestamp__": ["<ISO 8601>", "<time zone name or null>", <nanoseconds>]}`,
`{"__djx__value_date__": "2020-01-01"}`, `{"__djx__value_time__": "12:30:00"}`,
`{"__djx__value_duration__": <microseconds>}`, `{"__djx__value_decimal__": "1.10"}`; the finish
turns them back into the values (`loads`), so a .parquet export has binary, timestamp, date, time,
duration and decimal columns again. A .jsonl or .json export of parquet columns of such values is
refused before any work (io/parquet_reader.py: JSON cannot hold them, and readers would take djx's
objects for text); one that a plug-in op put into a sample is written in this lossless form, never
as its repr.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json

TAG = "__djx__value_"
_TAG_BYTES = b'"' + TAG.encode()


def tagged(v):
    """`json.dumps(default=tagged)`: the one-key object for a value JSON cannot hold; str() of any
    other object (what a plug-in op may put into a sample), as djx always wrote it."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {TAG + "binary__": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, datetime.datetime):  # a pandas Timestamp too (a timestamp[ns] column's)
        tz = getattr(v.tzinfo, "key", None) or getattr(v.tzinfo, "zone", None)
        py = v.replace(nanosecond=0).to_pydatetime() if hasattr(v, "nanosecond") else v
        return {TAG + "timestamp__": [py.isoformat(timespec="microseconds"), tz, getattr(v, "nanosecond", 0)]}
    if isinstance(v, datetime.date):
        return {TAG + "date__": v.isoformat()}
    if isinstance(v, datetime.time):
        return {TAG + "time__": v.isoformat()}
    if isinstance(v, datetime.timedelta):
        return {TAG + "duration__": (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds}
    if isinstance(v, decimal.Decimal):
        return {TAG + "decimal__": str(v)}
    return str(v)


def _untag(obj: dict):
    if len(obj) != 1:
        return obj
    (key, v), = obj.items()
    if not key.startswith(TAG):
        return obj
    kind = key[len(TAG):-2]
    try:
        if kind == "binary":
            return base64.b64decode(v, validate=True)
        if kind == "timestamp":
            return _timestamp(*v)
        if kind == "date":
            return datetime.date.fromisoformat(v)
        if kind == "time":
            return datetime.time.fromisoformat(v)
        if kind == "duration":
            return datetime.timedelta(microseconds=v)
        if kind == "decimal":
            return decimal.Decimal(v)
    except (TypeError, ValueError, ArithmeticError):
        pass
    return obj  # not djx's: left as it is


def _timestamp(iso: str, tz: str | None, ns: int):
    t = datetime.datetime.fromisoformat(iso)
    if tz:
        import zoneinfo
        try:
            t = t.astimezone(zoneinfo.ZoneInfo(tz))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    if ns:
        import pandas as pd
        t = pd.Timestamp(t) + pd.Timedelta(nanoseconds=ns)
    return t


def loads(line):
    """json.loads, with djx's one-key objects turned back into their values."""
    if (_TAG_BYTES if isinstance(line, bytes) else TAG) not in line:
        return json.loads(line)
    return json.loads(line, object_hook=_untag)
