"""The stats file beside an export (`keep_stats_in_res_ds: false`): each kept sample's djx keys
(`__dj__stats__`, its position, the stats' provenance) split from the record as exported, with a
digest of that record, and put back into it when read again (only into the record it belongs to)."""
from __future__ import annotations

import hashlib
import json

from djx.core.recipe.context import STATS_KEY

DIGEST_KEY = "__djx__record__"  # in a stats row: the digest of the exported record it belongs to


def is_internal(key) -> bool:
    """djx's own keys (`__dj__...`, `__djx__...`), never an input's."""
    return isinstance(key, str) and key.startswith(("__dj__", "__djx__"))


def record_digest(record: dict) -> str:
    """What identifies an exported record: its input keys (null values aside: a parquet file fills
    a column a record lacks with null), as canonical JSON."""
    body = {k: v for k, v in record.items() if not is_internal(k) and v is not None}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def split_record(record: dict, keep_stats: bool = False) -> tuple[dict, dict]:
    """(the record as exported: input keys only, and its stats with `keep_stats`; its stats row:
    djx's keys and the digest)."""
    clean = {k: v for k, v in record.items() if not is_internal(k) or (keep_stats and k == STATS_KEY)}
    row = {k: v for k, v in record.items() if is_internal(k)}
    row[DIGEST_KEY] = record_digest(clean)
    return clean, row


def put_back(record, row: dict | None) -> tuple[object, bool]:
    """The record with its stats row put back, when the row is this record's; (record, matched)."""
    if not isinstance(record, dict) or not isinstance(row, dict) or row.get(DIGEST_KEY) != record_digest(record):
        return record, False
    return {**record, **{k: v for k, v in row.items() if k != DIGEST_KEY and is_internal(k)}}, True
