"""The local engine's bookkeeping: the input batches read and not yet emitted, and the jobs (whole
batches, retries, bisected halves, single samples) whose results will account for them."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from djx.core.executors.local.worker import Task
from djx.core.records import BatchResult


@dataclass
class Job:
    """Part of an input batch given to a worker: the whole batch, a retry, or a bisected half."""
    task: Task
    batch_no: int
    deaths: int = 0
    bisected: bool = False


@dataclass
class InFlight:
    """The batches read and not yet emitted, and the jobs that will account for them."""
    jobs: dict = field(default_factory=dict)        # job id -> Job
    ready: deque = field(default_factory=deque)     # jobs waiting for a worker
    missing: dict = field(default_factory=dict)     # batch no -> items not yet accounted for
    parts: dict = field(default_factory=dict)       # batch no -> [(first position, BatchResult)]
    read_at: dict = field(default_factory=dict)     # batch no -> reader position after it

    def add_part(self, batch_no: int, first_pos: int, result: BatchResult, n_items: int) -> None:
        self.parts[batch_no].append((first_pos, result))
        self.missing[batch_no] -= n_items

    def pop_complete(self, batch_no: int, n_ops: int) -> BatchResult | None:
        """Batch `batch_no` merged from its parts in input order, once every item is in."""
        if self.missing.get(batch_no, -1) != 0:
            return None
        parts = sorted(self.parts.pop(batch_no), key=lambda p: p[0])
        del self.missing[batch_no]
        merged = sum((r for _, r in parts), BatchResult.empty(n_ops))
        merged.read_at = self.read_at.pop(batch_no)
        return merged
