"""The executor contract: `run(source)` turns input batches into BatchResults, one per batch, in
input order, each carrying the reader position a checkpoint resumes from. The local engine and
the Ray engine implement it; the ledger consumes what they yield."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Protocol

from djx.core.io.export_input import with_stats_rows
from djx.core.io.readers import ReadState, read_files
from djx.core.io.record_limits import MAX_RECORD_BYTES
from djx.core.records import BatchResult, Item, WorkerReport


@dataclass
class InputBatch:
    """Records read together, and where the reader stood after them (None: not resumable)."""
    items: list[Item]
    read_at: dict | None = None


@dataclass
class DatasetSource:
    """A dataset's files read from `state` on, in batches of `batch_size` records and at most
    `max_batch_bytes` of raw lines (one record at least), so that memory in flight is bounded in
    bytes, not only in records. Iterating it reads (the local engine); the Ray engine reads
    `files` itself and advances `state` as rows return."""
    files: list[str]
    state: ReadState = field(default_factory=ReadState)
    batch_size: int = 64
    max_batch_bytes: int = 64 << 20
    limit: int | None = None          # read no sample past the first `limit` (a trial run)
    on_first_read: Callable[[], None] | None = None  # called once reading starts (start-up is over)
    max_record_bytes: int = MAX_RECORD_BYTES  # a record over this is rejected unread (recipe max_record_bytes)
    stats_file: str | None = None  # the stats file beside the export read (export_input.stats_beside)
    read_seconds: float = 0.0  # time spent reading (the main process's share of a run: core/run/breakdown.py)

    def __iter__(self) -> Iterator[InputBatch]:
        if self.on_first_read is not None:
            self.on_first_read()
        items = read_files(self.files, self.state, parse=False,  # workers parse the lines
                           max_read_bytes=self.max_batch_bytes, max_record_bytes=self.max_record_bytes)
        if self.stats_file:
            items = with_stats_rows(items, self.stats_file, self.state.records)
        if self.limit is not None:  # the first `limit` samples (blank lines are not samples)
            items = itertools.islice(items, max(self.limit - self.state.records, 0))
        block, size, t0 = [], 0, time.perf_counter()
        for item in items:
            block.append(item)
            size += item.size
            if len(block) >= self.batch_size or size >= self.max_batch_bytes:
                self.read_seconds += time.perf_counter() - t0
                yield InputBatch(block, dict(vars(self.state)))
                block, size, t0 = [], 0, time.perf_counter()
        self.read_seconds += time.perf_counter() - t0
        if block:
            yield InputBatch(block, dict(vars(self.state)))


class Executor(Protocol):
    reports: dict[str, WorkerReport]  # worker name -> its last report
    restarts: int                     # workers that died and were replaced

    def run(self, source: Iterable[InputBatch], stop=None) -> Iterator[BatchResult]:
        """One BatchResult per input batch, in input order, each with the batch's read_at. Once
        `stop` (a core.run.stop.Stop) is requested, raise its Stopped between batches."""
        ...
