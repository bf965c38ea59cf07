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
    return summary if isinstance(summary, dict) else None
