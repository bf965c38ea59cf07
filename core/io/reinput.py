"""Reading djx's own outputs back as inputs: a kept or dropped file, a rejected file, a copy of one.

A sample of an export carries `__dj__stats__` (reused by the filters unless `recompute_stats`),
and a dropped one `__dj__drop__` (the verdict of an earlier run: removed, this run gives its own).
A line of a rejected file wraps the input record under `record` (or its unparsed text under `raw`):
it is read as that record, so fixed images or a new recipe can be tried on exactly those samples.
"""
from __future__ import annotations

from djx.core.recipe.context import DROP_KEY, ORIGIN_POS_KEY, POSITION_KEY, STATS_KEY
from djx.core.records import Item
from djx.core.io.stats_rows import put_back

_REJECTED_FIELDS = {"file", "line", "op", "reason", "code", "record", "raw", "text_seen"}  # besides __dj__ keys


def is_rejected_record(record) -> bool:
    """A line of a `.rejected.jsonl` file (written by Rejection.to_record)."""
    return (isinstance(record, dict) and POSITION_KEY in record and "reason" in record
            and ("record" in record or "raw" in record)
            and {k for k in record if not str(k).startswith("__dj__")} <= _REJECTED_FIELDS)


def unwrap_rejected(item: Item) -> bool:
    """An item read from a rejected file becomes the record that was rejected (in place); one whose
    line never parsed is rejected again, with its text and the earlier reason. An item read from an
    export with a stats file beside it gets its stats row back (True when the row is not its own:
    then it gets none, and its stats are computed again)."""
    if item.stats_row is not None:
        item.record, matched = put_back(item.record, item.stats_row)
        item.stats_row = None
        return not matched and item.error is None
    rec = item.record
    if not is_rejected_record(rec):
        return False
    if "record" in rec:
        item.record = rec["record"]
        if isinstance(item.record, dict) and not {ORIGIN_POS_KEY, POSITION_KEY} & set(item.record):
            item.record = {**item.record, ORIGIN_POS_KEY: rec[POSITION_KEY]}  # where it was first read
    else:
        item.record, item.raw = None, rec.get("raw")
        item.error = f"read from a rejected file, where it was rejected as: {rec.get('reason')}"
    return False


def input_sample(record: dict, pos: int, from_input: bool = True) -> dict:
    """The working copy of an input record: its own stats dict (filters add to it, the record as
    read stays as it was, for a rejection), an earlier run's drop verdict removed, this position."""
    sample = dict(record)
    sample.pop(DROP_KEY, None)
    if isinstance(sample.get(STATS_KEY), dict):
        sample[STATS_KEY] = dict(sample[STATS_KEY])
    earlier = sample.get(POSITION_KEY)
    if from_input and isinstance(earlier, int) and not isinstance(earlier, bool) and ORIGIN_POS_KEY not in sample:
        sample[ORIGIN_POS_KEY] = earlier  # read from a djx output: its first run's position travels on
    sample[POSITION_KEY] = pos
    return sample
