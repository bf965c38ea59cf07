"""Batches in flight inside one worker: lanes that take turns on the worker's core.

With `scoring: device` a worker sends each batch's prepared pairs to its device's scorer and would
sit idle until the scores come back, and the device would wait for the next batch meanwhile. A
worker with lanes runs up to `n` tasks at once, each on its own thread, and the threads take turns
on the one core the plan gives the worker (one lock): a lane holds the core while it works and
lets go of it only while it waits for the device (`waiting`), so the next batch is prepared
while the last is scored. Only one lane computes at any time: one core's work and no fight over
the interpreter lock, and the shared Status always names the task that is computing (or, when
every lane waits, the last one that was), which is what the executor's watchdog and its
dead-worker rules read.
"""
from __future__ import annotations

import contextlib
import threading
import time


class Lanes:
    def __init__(self, n: int, status):
        self.n = max(1, n)
        self._status = status      # shared with the executor: task id, op index, since
        self._core = threading.Lock()
        self._mine = threading.local()  # this lane's (task id, op index, since)

    @contextlib.contextmanager
    def working(self, task_id: int):
        """Hold the core for one task (from its first op to its answer)."""
        with self._core:
            self._mark(task_id, -1)
            try:
                yield
            finally:
                self._mine.state = None

    def on_op(self, k: int) -> None:
        """The task of this lane starts op `k` (the watchdog's clock restarts)."""
        self._mark(self._mine.state[0], k)

    @contextlib.contextmanager
    def waiting(self):
        """Around a wait for the device: another lane has the core meanwhile. A thread that holds
        no task (a worker's start-up, a Ray actor) just waits."""
        state = getattr(self._mine, "state", None)
        if state is None:
            yield
            return
        self._core.release()
        try:
            yield
        finally:
            self._core.acquire()
            self._show(state)

    def _mark(self, task_id: int, op_index: int) -> None:
        self._mine.state = (task_id, op_index, time.monotonic())
        self._show(self._mine.state)

    def _show(self, state: tuple) -> None:
        self._status.task_id, self._status.op_index, self._status.since = state
