"""Streaming readers: JSON Lines (parsed by the workers, through jsonlines), JSON array files and parquet.

A dataset's files (io/dataset.py) are read file after file in sorted order. Each reader yields Items with a position (0-based record index over the whole
dataset) and the index of their file; a JSON Lines item also carries its 1-based line number in
its file. Unparseable lines become Items with an error, never exceptions, so the bad record is
rejected with its raw text. Blank lines are skipped and counted.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Iterator

from djx.core.errors import DjxError
from djx.core.io.dataset import file_kind
from djx.core.io.parquet_reader import read_parquet
from djx.core.io.record_limits import MAX_RECORD_BYTES, record_problem, too_deep, too_large
from djx.core.io.regular_file import open_input
from djx.core.records import Item, parse_pending


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


def read_files(files: list[str], state: ReadState, parse: bool, max_read_bytes: int = 64 << 20,
               max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """The records of `files` from `state` on. A parquet file is read at most about max_read_bytes
    of decoded rows at a time; a JSON line or parquet row over max_record_bytes is rejected unread
    (a parquet row: decoded once to be measured)."""
    while state.file < len(files):
        path = files[state.file]
        kind = file_kind(path)
        if kind == "parquet":
            yield from read_parquet(path, state, max_read_bytes, max_record_bytes)
        elif kind == "json":
            yield from _read_json_array(path, state)
        else:
            for item in _read_jsonl_raw(path, state, max_record_bytes):
                if parse:
                    parse_pending([item])
                yield item
        state.next_file()


def decode_line(raw: bytes, at: int) -> tuple[str, str | None]:
    """A JSON line's text, and why it is not valid (None: it may be). Bad UTF-8 is never replaced
    by U+FFFD: the record would be read as something it does not say. `at`: the line's byte
    offset in its file, so the reason points at the bad byte; the text then shows it escaped."""
    try:
        return raw.decode("utf-8").rstrip("\r\n"), None
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
        return text, (f"not valid JSON: invalid UTF-8 at byte {at + e.start} of the file "
                      f"({raw[e.start:e.start + 1]!r}, byte {e.start} of the line; {e.reason})")


def _read_jsonl_raw(path: str, state: ReadState, max_record_bytes: int) -> Iterator[Item]:
    with open_input(path) as f:
        f.seek(state.offset)
        while raw := f.readline(max_record_bytes + 1):
            at, over = state.offset, len(raw) > max_record_bytes and not raw.endswith(b"\n")
            size = len(raw) + (_skip_line(f) if over else 0)  # over the limit: only its head is read
            state.offset += size
            state.lines += 1
            if not over and not raw.strip():
                state.blank_lines += 1
                continue
            if over:
                text = decode_line(raw[:200], at)[0] + "..."
                error = too_large(f"the line at byte {at}", size, max_record_bytes)
            else:
                text, error = decode_line(raw, at)
            item = Item(state.records, line=state.lines, raw=text, pending=error is None, error=error,
                        file=state.file, size=size)
            state.records += 1
            yield item


def _skip_line(f) -> int:
    """Read past the rest of a line, a MiB at a time; the bytes it had."""
    n = 0
    while part := f.readline(1 << 20):
        n += len(part)
        if part.endswith(b"\n"):
            break
    return n


class _JsonText:
    """A .json file's text from a buffer that holds the current record and what follows it, grown
    (doubling) only as far as one record needs, never the whole file."""

    def __init__(self, f):
        self.f, self.buf, self.pos, self.eof = f, "", 0, False

    def more(self) -> bool:
        """Read on: at least CHUNK more characters, or as many as the buffer holds; False at EOF."""
        if self.eof:
            return False
        chunk = self.f.read(max(JSON_CHUNK, len(self.buf) - self.pos))
        self.eof = not chunk
        self.buf, self.pos = self.buf[self.pos:] + chunk, 0
        return bool(chunk)

    def peek(self) -> str | None:
        """The next character that is not whitespace (None at the end), with enough text after it
        for any record under CHUNK to decode at once."""
        while True:
            if len(self.buf) - self.pos < JSON_CHUNK and not self.eof:
                self.more()
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return None


JSON_CHUNK = 1 << 20
MAX_JSON_RECORD = 1 << 30  # characters one record of a .json file may take


def _read_json_array(path: str, state: ReadState) -> Iterator[Item]:
    """The records of a top-level JSON array, decoded one at a time. Several arrays one after
    another (files joined with `cat`) are read as one; anything else after an array is refused,
    never silently dropped."""
    decoder = json.JSONDecoder()
    index, arrays = 0, 0
    try:
        with io.TextIOWrapper(open_input(path), encoding="utf-8-sig") as f:  # a BOM is read past, as in .jsonl
            t = _JsonText(f)
            while True:
                c = t.peek()
                if c is None:
                    if arrays == 0:
                        raise DjxError(f"{path}: empty file; a .json dataset is a JSON array of objects")
                    return
                if c != "[":
                    raise DjxError(_after_array(path, t.buf[t.pos:t.pos + 40]) if arrays else
                                   f"{path}: a .json dataset must be a JSON array of objects; "
                                   f"use .jsonl for one object per line")
                t.pos += 1
                arrays += 1
                while (c := t.peek()) != "]":
                    if c is None:
                        raise DjxError(f"{path}: JSON array is not closed (truncated file?)")
                    if c == ",":
                        t.pos += 1
                        continue
                    record, text = _decode_record(decoder, t, path, index)
                    if state.file_start + index >= state.records:
                        state.records = state.file_start + index + 1
                        error = too_deep() if record is _TOO_DEEP else record_problem(record, text)
                        yield Item(state.records - 1, record=None if error else record, error=error,
                                   raw=text if error else None, file=state.file, size=len(text))
                    index += 1
                t.pos += 1
    except UnicodeDecodeError as e:
        raise DjxError(f"{path}: not valid UTF-8 ({e.reason}); a .json dataset is UTF-8 text") from None


def _decode_record(decoder: json.JSONDecoder, t: _JsonText, path: str, index: int) -> tuple[object, str]:
    """The record at t.pos and its text, reading on while it is cut off by the buffer's end."""
    while True:
        try:
            record, end = decoder.raw_decode(t.buf, t.pos)
        except RecursionError:
            record, end = _skip_deep(t, path, index)
        except json.JSONDecodeError as e:
            cut_off = e.msg.startswith("Unterminated string") or e.pos >= len(t.buf) - 16
            if cut_off and len(t.buf) - t.pos <= MAX_JSON_RECORD and t.more():
                continue
            if cut_off and not t.eof:
                raise DjxError(f"{path}: record {index} is larger than {MAX_JSON_RECORD >> 20} MB, or not "
                               f"valid JSON ({e}); write large records as JSON Lines") from None
            raise DjxError(f"{path}: record {index} is not valid JSON ({e})") from None
        text, t.pos = t.buf[t.pos:end], end
        return record, text


def _skip_deep(t: _JsonText, path: str, index: int) -> tuple[object, int]:
    """A record too deep to decode: find where it ends (brackets outside strings) so that it is
    rejected alone; the record itself is then never built."""
    depth, i, in_string = 0, t.pos, False
    while True:
        if i >= len(t.buf):
            i -= t.pos
            if not t.more():
                raise DjxError(f"{path}: record {index} is not valid JSON (not closed)")
            continue
        c = t.buf[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return _TOO_DEEP, i + 1
        i += 1


_TOO_DEEP = object()


def _after_array(path: str, what: str) -> str:
    return (f"{path}: data after the closing ] of its JSON array ({what!r}...); a .json dataset is "
            f"one JSON array of objects (or several joined one after another): remove the rest, or "
            f"write the dataset as JSON Lines")
