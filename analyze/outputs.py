"""Reading a finished run's outputs, one record at a time, in whatever format the run wrote them
(JSON Lines, a JSON array, parquet, shards, a stats file beside the export): core/output_reader.py
knows the formats; this module adds what analysis needs around it."""
from __future__ import annotations

import json
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
    """The run summary, or None when there is none."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        raise DjxError(f"{path}: the run summary is unreadable ({e})") from None
    if not isinstance(summary, dict):
        return None
    problems = _op_rows_problems(summary.get("ops"))
    if problems:  # an older or hand-written summary: left out where it cannot be read, and said
        summary = {k: v for k, v in summary.items() if k != "ops"}
        summary["unusable"] = [f"ops ({'; '.join(problems)})"]
    return summary


OP_FIELDS = ("name", "in", "kept", "dropped", "rejected")


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
        missing = [k for k in OP_FIELDS if k not in row or (k != "name") != _count(row[k])]
        if missing:
            problems.append(f"ops[{i}] lacks {', '.join(missing)}")
    return problems[:5]


def _count(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
