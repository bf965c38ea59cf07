"""Reading a finished run's outputs, one record at a time, in whatever format the run wrote them
(JSON Lines, a JSON array, parquet, shards, a stats file beside the export): core/output_reader.py
knows the formats; this module adds what analysis needs around it."""
from __future__ import annotations

import json
import math
import os
from typing import Iterator

from djx.core.errors import DjxError
from djx.core.io.output_reader import export_files, iter_output
from djx.core.io.outputs import OutputPaths


def iter_records(path: str) -> Iterator[dict]:
    """The records of one output, streamed. An output that was not written holds none."""
    if not path or not export_files(path):
        return
    for n, rec in iter_output(path):
        if not isinstance(rec, dict):
            raise DjxError(f"{path}: record {n + 1} is not a JSON object ({type(rec).__name__}); "
                           f"is this a djx output?")
        yield rec


def output_paths(export: str) -> OutputPaths:
    """The files of the run whose export is `export`; refuses a path that is not one."""
    if os.path.isdir(export):
        raise DjxError(f"{export} is a folder; give the export file of a run (e.g. out/demo.jsonl)")
    paths = OutputPaths.for_export(export)
    if not export_files(paths.export):
        raise DjxError(f"no such output: {export} (give the export_path of a finished run)")
    return paths


def read_summary(path: str) -> dict | None:
    """The run summary, or None when there is none. Fields of the wrong type are left out and named
    in its "unusable" list (["input (\"twelve\" is not a count)", ...])."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        raise DjxError(f"{path}: the run summary is unreadable ({e})") from None
    if not isinstance(summary, dict):
        return {"unusable": [f"fields (it is {_shown(summary)}, not a JSON object)"]}
    # an older or hand-written summary: what cannot be read is left out, and said
    unusable = [f"{key} ({problem})" for key, problem in _field_problems(summary).items()]
    problems = _op_rows_problems(summary.get("ops"))
    if problems:
        unusable.append(f"ops ({'; '.join(problems)})")
    if unusable:
        bad = {u.split(" ", 1)[0] for u in unusable}
        summary = {k: v for k, v in summary.items() if k not in bad}
        summary["unusable"] = unusable
    return summary


OP_FIELDS = ("name", "in", "kept", "dropped", "rejected")
COUNT_FIELDS = ("input", "kept", "dropped", "rejected", "limit")
TEXT_FIELDS = ("project_name", "dataset_path")
SECONDS_FIELDS = ("timing", "time_breakdown")  # the report's "Where the time went"


def _field_problems(summary: dict) -> dict[str, str]:
    """The top-level fields a viewer reads that hold the wrong type: field -> what it holds."""
    problems = {}
    for key in COUNT_FIELDS:
        v = summary.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            problems[key] = f"{_shown(v)} is not a count"
    for key in TEXT_FIELDS:
        v = summary.get(key)
        if v is not None and not isinstance(v, str):
            problems[key] = f"{_shown(v)} is not a text"
    for key in SECONDS_FIELDS:
        v = summary.get(key)
        if v is not None and not (isinstance(v, dict) and _seconds(v)):
            problems[key] = f"{_shown(v)} is not an object of seconds"
    return problems


def _seconds(v) -> bool:
    """A finite number, or an object whose values are (at any depth): where the time went."""
    if isinstance(v, dict):
        return all(_seconds(x) for x in v.values())
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _shown(v) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:40] + "..."


def _op_rows_problems(ops) -> list[str]:
    """What keeps a summary's `ops` from being read as the per-op counts (none when it can be)."""
    if ops is None:
        return []
    if not isinstance(ops, list):
        return [f"not a list but {type(ops).__name__}"]
    problems = []
    for i, row in enumerate(ops):
        if not isinstance(row, dict):
            problems.append(f"ops[{i}] is {type(row).__name__}, not an object")
            continue
        missing = [k for k in OP_FIELDS if k not in row]
        bad = [k for k in OP_FIELDS[1:] if k in row and not _count(row[k])]
        if missing:
            problems.append(f"ops[{i}] lacks {', '.join(missing)}")
        if bad:
            problems.append(f"ops[{i}] has {', '.join(f'{k} = {_shown(row[k])}' for k in bad)}, not counts")
    return problems[:5]


def _count(v) -> bool:
    """A count of samples: a whole number, not negative (nor a float: NaN, 1e308, 2.5)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0
