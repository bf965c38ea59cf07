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


class _Core:
    """The worker's one core: a lock that a lane coming back from the device gets before a lane
    that would start a new batch. Its batch is the one the run has waited longest for (results are
    written in input order), and finishing it takes little work; a plain lock lets new batches
    overtake it again and again."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._held = False
        self._back = 0  # lanes back from the device, waiting for the core
        self.waiting = 0  # lanes waiting for the core

    def acquire(self, back: bool = False) -> None:
        with self._cond:
            self._back += back
            self.waiting += 1
            while self._held or (not back and self._back):
                self._cond.wait()
            self._back -= back
            self.waiting -= 1
            self._held = True

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()


class Lanes:
    def __init__(self, n: int, status):
        self.n = max(1, n)
        self._status = status      # shared with the executor: task id, op index, since
        self._core = _Core()
        self._mine = threading.local()  # this lane's (task id, op index, since)

    @contextlib.contextmanager
    def working(self, task_id: int):
        """Hold the core for one task (from its first op to its answer)."""
        self._core.acquire()
        try:
            self._mark(task_id, -1)
            yield
        finally:
            self._mine.state = None
            self._core.release()

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
            self._core.acquire(back=True)
            self._show(state)

    def _mark(self, task_id: int, op_index: int) -> None:
        self._mine.state = (task_id, op_index, time.monotonic())
        self._show(self._mine.state)

    def _show(self, state: tuple) -> None:
        # the task id last: the executor reads it first, then `since`, while this thread may be
        # between two writes (it can lose the interpreter or its core there); a task shown with
        # the status's first `since` (0.0, the clock's origin) looked stuck for the machine's
        # whole uptime, and a machine up longer than sample_timeout killed the worker
        task_id, op_index, since = state
        self._status.since, self._status.op_index = since, op_index
        self._status.task_id = task_id
