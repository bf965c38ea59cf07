"""The values that cross a boundary (reader to worker, worker pipe, Ray row, executor to ledger),
each with a name and fields: an input Item, a Rejection, per-op OpCounts, the BatchResult of one
batch (carrying its own resume position) and a worker's WorkerReport."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, fields
from typing import Any

import jsonlines

from djx.core.recipe.context import POSITION_KEY, STATS_KEY
from djx.core.errors import DjxError


@dataclass
class Item:
    """One input record as the reader saw it: parsed (`record`), or unparsed (`raw`, with `pending`
    set while a worker has yet to parse it, or `error` saying why it does not parse)."""
    pos: int
    record: Any = None
    line: int | None = None
    error: str | None = None
    raw: str | None = None
    pending: bool = False
    file: int = 0  # index into RunContext.input_files
    size: int = 0  # bytes it took as read (a JSON line, a parquet row decoded): what max_batch_bytes counts
    stats_row: Any = None  # its row of the stats file beside the export it was read from (export_input.py)


def _not_json(cause) -> str:
    if cause is None:
        return "not valid JSON"
    if not isinstance(cause, json.JSONDecodeError) and "integer string conversion" in str(cause):
        # valid JSON, but Python reads integers of at most sys.get_int_max_str_digits() digits
        return (f"not readable: it holds an integer of more than {sys.get_int_max_str_digits()} digits, more than "
                f"Python reads (PYTHONINTMAXSTRDIGITS raises the limit)")
    return f"not valid JSON ({cause})"


def parse_pending(items: list[Item]) -> None:
    """Parse the raw JSON lines of pending items in place, through one jsonlines reader; a line
    that parses to a record djx cannot carry (see record_limits) gets an error, as bad JSON does."""
    from djx.core.io.record_limits import record_problem, too_deep
    pending = [it for it in items if it.pending]
    if not pending:
        return
    reader = jsonlines.Reader(it.raw for it in pending)
    for it in pending:
        try:
            it.record = reader.read(allow_none=True)
            it.error = record_problem(it.record, it.raw)
        except jsonlines.InvalidLineError as e:
            it.error = _not_json(e.__cause__)
        except RecursionError:
            it.error = too_deep()
        if it.error:
            it.record = None
        it.pending = False


@dataclass
class Rejection:
    """A sample that could not be processed, with why; `op_index` is None for bad input caught
    before any op. Written to the rejected file as `to_record()`."""
    pos: int
    line: int | None
    op: str | None
    op_index: int | None
    reason: str
    code: str | None = None
    record: Any = None       # the input record as read ...
    raw: str | None = None   # ... or, when it did not parse, its raw text
    file: int = 0            # index into RunContext.input_files
    error: str | None = None  # the exception type, when an op raised
    text_seen: str | None = None  # the text as the op saw it, when a mapper had changed it (bounded)
    hashes: dict | None = None  # the hash stats of the deduplicators it passed: the dedup phase groups it too

    def to_record(self, input_files: tuple[str, ...] = ()) -> dict:
        rec = {POSITION_KEY: self.pos}
        if len(input_files) > 1:
            rec["file"] = input_files[self.file]
        rec.update(line=self.line, op=self.op, reason=self.reason, code=self.code)
        if self.text_seen is not None:
            rec["text_seen"] = self.text_seen
        if self.hashes:
            rec.update({"op_index": self.op_index, STATS_KEY: self.hashes})
        if self.raw is not None:
            rec["raw"] = self.raw
        else:
            rec["record"] = self.record
        return rec

    def fail_message(self, input_files: tuple[str, ...] = ()) -> str:
        """What on_error: fail says about this sample (the same on every executor)."""
        where = f"line {self.line}" if self.line else f"record {self.pos}"
        if len(input_files) > 1:
            where = f"{input_files[self.file]}, {where}"
        return (f"{where}: {self.reason}" + (f" (op {self.op})" if self.op else "")
                + "; set on_error: reject to write bad samples to the rejected file and go on")


class FailFast(DjxError):
    """on_error: fail, and a sample was bad."""


@dataclass
class OpCounts:
    """One op's tally: samples in (and of them, with images, for ops that read images), and how
    they left it; `seconds` is summed over workers."""
    seen: int = 0
    kept: int = 0
    dropped: int = 0
    rejected: int = 0
    seconds: float = 0.0
    with_images: int = 0
    reused: int = 0  # samples whose stats for this filter were already there (not recomputed)
    # where the op's time went, summed over workers: phase (decode, preprocess, wait, transfer,
    # forward, scorer_busy, ...) -> seconds (core/run/breakdown.py)
    phases: dict = field(default_factory=dict)

    def __add__(self, other: "OpCounts") -> "OpCounts":
        return OpCounts(*(add_counters(getattr(self, f.name), getattr(other, f.name)) if f.name == "phases"
                          else getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_dict(self) -> dict:
        return {"in": self.seen, "kept": self.kept, "dropped": self.dropped, "rejected": self.rejected,
                "seconds": self.seconds, "with_images": self.with_images, "reused": self.reused,
                "phases": dict(self.phases)}

    @classmethod
    def from_dict(cls, d: dict) -> "OpCounts":
        return cls(d["in"], d["kept"], d["dropped"], d["rejected"], d["seconds"], d.get("with_images", 0),
                   d.get("reused", 0), dict(d.get("phases") or {}))


def add_counters(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Event counters (oom_retries, actor_deaths, ...) of two results, summed."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}


@dataclass
class BatchResult:
    """What one input batch became. `read_at` is the reader's position after the batch: a
    checkpoint taken once this result is written resumes from there."""
    kept: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    op_counts: list[OpCounts] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    read_at: dict | None = None
    # per sample that reached the ops: (position, index of the last op it reached, has images);
    # None where an engine does not say (the early check then counts per batch)
    reach: list[tuple[int, int, bool]] | None = None
    # the wall-clock time the engine began this batch (the Ray engine: when it entered its last stage,
    # every model stage ready by then; its rows come back as one block, so the driver cannot see when
    # processing began); None: the engine does not say
    began_at: float | None = None

    @classmethod
    def empty(cls, n_ops: int) -> "BatchResult":
        return cls(op_counts=[OpCounts() for _ in range(n_ops)])

    @property
    def samples(self) -> int:
        return len(self.kept) + len(self.dropped) + len(self.rejected)

    def __add__(self, other: "BatchResult") -> "BatchResult":
        counts = [a + b for a, b in zip(self.op_counts, other.op_counts)] or other.op_counts
        return BatchResult(self.kept + other.kept, self.dropped + other.dropped,
                           self.rejected + other.rejected, counts, add_counters(self.counters, other.counters),
                           other.read_at if other.read_at is not None else self.read_at,
                           None if self.reach is None and other.reach is None
                           else sorted((self.reach or []) + (other.reach or [])),
                           min((t for t in (self.began_at, other.began_at) if t is not None), default=None))


@dataclass
class WorkerReport:
    """What a worker (a local process or a Ray actor) says about itself, for the summary."""
    device: str = "cpu"
    loads: dict[str, int] = field(default_factory=dict)          # model label -> loads
    load_seconds: dict[str, float] = field(default_factory=dict)
    measured_bytes: dict[str, int] = field(default_factory=dict)  # model label -> bytes
    peak_uss: int = 0           # sampled every second by a thread
    peak_device_bytes: int = 0
    peak_rss: int = 0           # the kernel's exact peak (counts shared pages too)
    peak_pss: int = 0           # shared pages charged 1/N to each of their N sharers
    uss: int = 0                # at the time of the report (local runs: read again at the end)
    pss: int = 0
    shared_bytes: dict[str, int] = field(default_factory=dict)  # model label -> bytes mapped from the shared copy
    # its start-up: entered_at, ready_at (wall clock), scorer_wait and host_side (seconds)
    setup: dict[str, float] = field(default_factory=dict)
