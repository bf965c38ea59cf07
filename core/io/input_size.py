"""How many samples a dataset holds, known before reading it: exact for parquet (its metadata),
counted for JSON Lines up to a size, estimated from bytes per record beyond it (and for .json
arrays). Used for the progress total and for a trial run's whole-dataset estimate; `has_more` says
whether a trial stopped before the dataset's end."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from djx.core.io.readers import ReadState, read_files
from djx.core.io.regular_file import open_input

COUNT_UP_TO = 1 << 30     # JSON Lines datasets up to this size are counted line by line
SAMPLE_BYTES = 4 << 20    # beyond it, bytes per record are measured on the first bytes of a file
_BLANK = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)


@dataclass(frozen=True)
class InputSize:
    """The dataset's sample count, whether it is exact, and how it was found (for a person)."""
    samples: int
    exact: bool
    how: str


def measure_input(files: list[str]) -> InputSize:
    """The number of samples in `files` (all of one format, as `dataset_files` returns them)."""
    if not files:
        return InputSize(0, True, "no input files")
    kind = _kind(files[0])
    total_bytes = sum(os.path.getsize(f) for f in files)
    if kind == "parquet":
        return InputSize(sum(_parquet_rows(f) for f in files), True,
                         f"exact: the row counts in the metadata of {_n_files(files)}")
    if kind == "jsonl" and total_bytes <= COUNT_UP_TO:
        return InputSize(sum(_count_lines(f) for f in files), True,
                         f"exact: the non-blank lines of {_n_files(files)} counted ({_mb(total_bytes)})")
    per_record = _bytes_per_record(files, kind)
    if per_record is None:
        return InputSize(0, False, f"unknown: no record found in the first {_mb(SAMPLE_BYTES)} of the input")
    samples, exact = per_record
    if exact:
        return InputSize(samples, True, f"exact: every record of {_n_files(files)} read")
    n = max(1, round(total_bytes / samples))
    return InputSize(n, False, f"estimated: {_mb(total_bytes)} of {_n_files(files)} at {samples:,.0f} bytes "
                               f"per record (measured on the first {_mb(SAMPLE_BYTES)} of the first file)")


def has_more(files: list[str], state: ReadState) -> bool:
    """Whether a sample follows the reader position `state` (which stays as it is)."""
    return next(read_files(files, ReadState(**vars(state)), parse=False), None) is not None


def _kind(path: str) -> str:
    lower = path.lower()
    return "parquet" if lower.endswith(".parquet") else "json" if lower.endswith(".json") else "jsonl"


def _n_files(files: list[str]) -> str:
    return "1 file" if len(files) == 1 else f"{len(files):,} files"


def _mb(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MB" if n >= 1 << 20 else f"{n / 1024:,.1f} KB"


def _parquet_rows(path: str) -> int:
    import pyarrow.parquet as pq
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # a damaged file: the reader says so with its own message when it gets there
        return 0


def _count_lines(path: str) -> int:
    """Lines holding more than whitespace, as the reader counts samples (blank lines are skipped)."""
    n, tail = 0, b""
    with open_input(path) as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            block = tail + block
            cut = block.rfind(b"\n") + 1
            whole, tail = block[:cut], block[cut:]
            n += whole.count(b"\n") - len(_BLANK.findall(whole))
    return n + (1 if tail.strip() else 0)


def _bytes_per_record(files: list[str], kind: str) -> tuple[float, bool] | None:
    """(bytes per record, False) from the first SAMPLE_BYTES of the first file with records; or
    (record count, True) when those bytes were the whole dataset (one small .json file)."""
    for path in files:
        with open_input(path) as f:
            head = f.read(SAMPLE_BYTES)
            whole = not f.read(1)
        if kind == "json":
            records, used = _json_records(head)
        else:
            lines = head[:head.rfind(b"\n") + 1] if not whole else head
            records, used = len([ln for ln in lines.splitlines() if ln.strip()]), len(lines)
        if records and whole and len(files) == 1:
            return records, True
        if records:
            return used / records, False
    return None


def _json_records(head: bytes) -> tuple[int, int]:
    """Records of a JSON array decoded from the start of a file, and the bytes they took."""
    text = head.decode("utf-8", "ignore")
    decoder, pos, n, end = json.JSONDecoder(), 0, 0, 0
    while pos < len(text):
        c = text[pos]
        if c in " \t\r\n,[\ufeff":
            pos += 1
            continue
        if c == "]":
            end = pos + 1
            break
        try:
            _, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            break
        n, end = n + 1, pos
    return n, len(text[:end].encode("utf-8"))
