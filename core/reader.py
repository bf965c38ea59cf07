"""Streaming readers: JSON Lines (through jsonlines), JSON array files and parquet.

Each yields Items with a position (0-based record index); a JSON Lines item also carries its
1-based line number. Unparseable lines become Items with an error, never exceptions, so the bad
record is rejected with its raw text. Blank lines are skipped and counted.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterator

import jsonlines

from .chain import Item
from .errors import DjxError


@dataclass
class ReadState:
    """Where the reader is: resumable from `offset` (bytes, JSON Lines) or `records` (others)."""
    records: int = 0
    offset: int = 0
    lines: int = 0
    blank_lines: int = 0


def read_items(path: str, state: ReadState | None = None, parse: bool = True) -> Iterator[Item]:
    """Stream a dataset from where `state` left it; `state` is updated as items are yielded.

    With parse=False, JSON Lines items come back `pending` (raw text only) for a worker to parse."""
    state = state or ReadState()
    if not os.path.exists(path):
        raise DjxError(f"dataset not found: {path}")
    if os.path.isdir(path):
        raise DjxError(f"dataset_path must be a file (.jsonl, .json or .parquet), got a folder: {path}")
    lower = path.lower()
    if lower.endswith(".parquet"):
        return _read_parquet(path, state)
    if lower.endswith(".json"):
        return _read_json_array(path, state)
    return _read_jsonl(path, state) if parse else _read_jsonl_raw(path, state)


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
                        pending=True)
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
                item = Item(state.records, record=record, line=state.lines)
            except EOFError:
                return
            except jsonlines.InvalidLineError as e:
                raw = e.line.decode("utf-8", "replace") if isinstance(e.line, bytes) else str(e.line)
                cause = e.__cause__
                why = f"not valid JSON ({cause})" if cause else "not valid JSON"
                item = Item(state.records, line=state.lines, error=why, raw=raw.rstrip("\r\n"))
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
            if index >= state.records:
                state.records = index + 1
                yield Item(index, record=record)
            index += 1


def _read_parquet(path: str, state: ReadState) -> Iterator[Item]:
    import pyarrow.parquet as pq
    index = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        rows = batch.to_pylist()
        if index + len(rows) <= state.records:
            index += len(rows)
            continue
        for row in rows:
            if index >= state.records:
                state.records = index + 1
                yield Item(index, record=row)
            index += 1
