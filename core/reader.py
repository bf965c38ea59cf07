"""Streaming readers: JSON Lines (through jsonlines), JSON array files and parquet.

A dataset is one file, a folder of files or a glob pattern (`dataset_files`), read file after file
in sorted order. Each reader yields Items with a position (0-based record index over the whole
dataset) and the index of their file; a JSON Lines item also carries its 1-based line number in
its file. Unparseable lines become Items with an error, never exceptions, so the bad record is
rejected with its raw text. Blank lines are skipped and counted.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Iterator

import jsonlines

from djx.core.records import Item
from djx.core.errors import DjxError


SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass
class ReadState:
    """Where the reader is: in file number `file` (of `dataset_files`), whose first record is
    record `file_start`; within it at byte `offset` and line `lines` (JSON Lines) or after
    `records` records in all (others)."""
    records: int = 0
    offset: int = 0
    lines: int = 0
    blank_lines: int = 0
    file: int = 0
    file_start: int = 0

    def next_file(self) -> None:
        self.file, self.offset, self.lines, self.file_start = self.file + 1, 0, 0, self.records


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def dataset_files(path: str) -> list[str]:
    """The files of a dataset_path, sorted: the file itself; a folder's .jsonl/.json/.parquet files
    (recursively, hidden names skipped); or the files a glob pattern (`**` included) matches."""
    if _is_glob(path):
        files = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
        if not files:
            raise DjxError(f"dataset_path: no file matches {path}")
    elif os.path.isdir(path):
        files = []
        for folder, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            files += [os.path.join(folder, n) for n in names
                      if not n.startswith(".") and n.lower().endswith(SUFFIXES)]
        files.sort()
        if not files:
            raise DjxError(f"dataset_path: the folder {path} holds no .jsonl, .json or .parquet file")
    elif os.path.isfile(path):
        return [path]
    else:
        raise DjxError(f"dataset not found: {path}")
    kinds = {_kind(f) for f in files}
    if len(kinds) > 1:
        raise DjxError(f"dataset_path {path}: the files mix formats ({', '.join(sorted(kinds))}); "
                       f"keep one format per dataset")
    return files


def dataset_root(path: str) -> str:
    """The folder relative image paths and file names resolve against: a folder dataset's own
    folder, a glob's folder before its first wildcard, or a file's folder."""
    if _is_glob(path):
        fixed = path[:min(path.index(c) for c in "*?[" if c in path)]
        return os.path.abspath(fixed if fixed.endswith(os.sep) else os.path.dirname(fixed) or ".")
    if os.path.isdir(path):
        return os.path.abspath(path)
    return os.path.dirname(os.path.abspath(path))


def _kind(path: str) -> str:
    lower = path.lower()
    return "parquet" if lower.endswith(".parquet") else "json" if lower.endswith(".json") else "jsonl"


def read_files(files: list[str], state: ReadState, parse: bool) -> Iterator[Item]:
    while state.file < len(files):
        path = files[state.file]
        kind = _kind(path)
        if kind == "parquet":
            yield from _read_parquet(path, state)
        elif kind == "json":
            yield from _read_json_array(path, state)
        else:
            yield from (_read_jsonl(path, state) if parse else _read_jsonl_raw(path, state))
        state.next_file()


def _read_jsonl_raw(path: str, state: ReadState) -> Iterator[Item]:
    with open(path, "rb") as f:
        f.seek(state.offset)
        for raw in f:
            state.offset += len(raw)
            state.lines += 1
            if not raw.strip():
                state.blank_lines += 1
                continue
            item = Item(state.records, line=state.lines, raw=raw.decode("utf-8", "replace").rstrip("\r\n"),
                        pending=True, file=state.file)
            state.records += 1
            yield item


def _read_jsonl(path: str, state: ReadState) -> Iterator[Item]:
    with open(path, "rb") as f:
        f.seek(state.offset)

        def lines():  # feeds jsonlines one non-blank line at a time, tracking offsets
            for raw in f:
                state.offset += len(raw)
                state.lines += 1
                if raw.strip():
                    yield raw
                else:
                    state.blank_lines += 1

        reader = jsonlines.Reader(lines())
        while True:
            try:
                record = reader.read(allow_none=True)
                item = Item(state.records, record=record, line=state.lines, file=state.file)
            except EOFError:
                return
            except jsonlines.InvalidLineError as e:
                raw = e.line.decode("utf-8", "replace") if isinstance(e.line, bytes) else str(e.line)
                cause = e.__cause__
                why = f"not valid JSON ({cause})" if cause else "not valid JSON"
                item = Item(state.records, line=state.lines, error=why, raw=raw.rstrip("\r\n"),
                            file=state.file)
            state.records += 1
            yield item


def _read_json_array(path: str, state: ReadState) -> Iterator[Item]:
    """A top-level JSON array, decoded element by element from 1 MB chunks (never whole)."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as f:
        buf, pos, index, started = "", 0, 0, False
        eof = False
        while True:
            if not eof and len(buf) - pos < 1 << 20:
                chunk = f.read(1 << 20)
                eof = not chunk
                buf = buf[pos:] + chunk
                pos = 0
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if not started:
                if pos >= len(buf):
                    if eof:
                        raise DjxError(f"{path}: empty file; a .json dataset is a JSON array of objects")
                    continue
                if buf[pos] != "[":
                    raise DjxError(f"{path}: a .json dataset must be a JSON array of objects; "
                                   f"use .jsonl for one object per line")
                started, pos = True, pos + 1
                continue
            if pos < len(buf) and buf[pos] == "]":
                return
            if pos >= len(buf) and eof:
                raise DjxError(f"{path}: JSON array is not closed (truncated file?)")
            try:
                record, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as e:
                if not eof:
                    if len(buf) - pos > 64 << 20:
                        raise DjxError(f"{path}: record {index} is not valid JSON ({e})") from None
                    chunk = f.read(1 << 20)
                    eof = not chunk
                    buf = buf[pos:] + chunk
                    pos = 0
                    continue
                raise DjxError(f"{path}: record {index} is not valid JSON ({e})") from None
            pos = end
            if state.file_start + index >= state.records:
                state.records = state.file_start + index + 1
                yield Item(state.records - 1, record=record, file=state.file)
            index += 1


def _read_parquet(path: str, state: ReadState) -> Iterator[Item]:
    import pyarrow.parquet as pq
    index = state.file_start  # the dataset position of the file's next row
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        rows = batch.to_pylist()
        if index + len(rows) <= state.records:
            index += len(rows)
            continue
        for row in rows:
            if index >= state.records:
                state.records = index + 1
                yield Item(index, record=row, file=state.file)
            index += 1
