"""Local executor: `np` worker processes, each running the whole op chain on one batch at a time.

Memory is bounded: at most `max_in_flight` batches are read ahead of the oldest unfinished one,
whatever the dataset size. Results come back in input order. A worker that dies (signal,
segfault, OOM killer) is replaced; its batch is retried once, then bisected until only the poison
sample is left, which is rejected; the run never hangs on a dead worker.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

import dill
import multiprocess as mp
from multiprocess.connection import wait

from .chain import BatchResult, FailFast, Item, OpChain, parse_pending
from .errors import DjxError
from .planner import Plan
from .worker import recv, send, worker_main

PREFETCH = 2  # batches queued per worker, so it never idles between batches


@contextlib.contextmanager
def _main_importable():
    """A spawned worker re-imports the parent's __main__ from its file (so that ops defined in a
    user's script unpickle). A script read from stdin or an interactive session has no such
    file: hide the name while starting the worker, or it dies before running any code."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


@dataclass
class _Task:
    id: int
    batch_no: int
    items: list
    deaths: int = 0
    bisected: bool = False


@dataclass
class _Worker:
    rank: int
    proc: object
    conn: object
    status: object
    tasks: deque = field(default_factory=deque)


class LocalExecutor:
    def __init__(self, chain: OpChain, plan: Plan, start_method: str = "spawn",
                 custom_ops: tuple = (), base_dir: str = ".", max_in_flight: int | None = None,
                 replan=None, log=print):
        self.chain = chain
        self.plan = plan
        self.replan = replan  # measured model bytes -> Plan (GPU runs revise the plan after rank 0)
        self.log = log
        self.mp = mp.get_context(start_method)
        self.custom_ops = tuple(custom_ops)
        self.base_dir = base_dir
        self.max_in_flight = max_in_flight or 2 * plan.workers
        self.reports: dict[int, dict] = {}   # rank -> {"pool": ..., "peak_uss": ...}
        self.restarts = 0
        self._chain_bytes = dill.dumps(chain)
        self._ids = itertools.count()

    # -- public ------------------------------------------------------------------------------
    def run(self, batches: Iterator[list[Item]]) -> Iterator[BatchResult]:
        """Yield one BatchResult per input batch, in input order."""
        workers: list[_Worker] = []
        try:
            workers = self._start_all()
            yield from self._loop(workers, batches)
        finally:
            self._stop(workers)

    # -- worker lifecycle -------------------------------------------------------------------
    def _spawn(self, rank: int, warmup: bool) -> _Worker:
        parent, child = self.mp.Pipe()
        status = self.mp.Array("q", [-1, -1], lock=False)
        proc = self.mp.Process(target=worker_main, name=f"djx-worker-{rank}", daemon=True,
                               args=(rank, self.plan.devices[rank], self.plan.threads_per_worker,
                                     self.custom_ops, self.base_dir, self._chain_bytes, child,
                                     status, warmup,
                                     self.plan.mem_fraction[rank] if self.plan.mem_fraction else 0.0))
        with _main_importable():
            proc.start()
        child.close()
        return _Worker(rank, proc, parent, status)

    def _await_ready(self, w: _Worker) -> None:
        try:
            msg = recv(w.conn)
        except EOFError:
            raise DjxError(f"worker {w.rank} died while starting (exit code {w.proc.exitcode})") from None
        if msg[0] == "init_error":
            raise DjxError(f"worker {w.rank} failed to start: {msg[2]}")
        if msg[0] == "init_user_error":
            raise DjxError(msg[2])
        self.reports[w.rank] = {"pool": msg[2], "peak_uss": 0}

    def _start_all(self) -> list[_Worker]:
        warm = bool(self.chain.model_specs())
        first = self._spawn(0, warm)
        self._await_ready(first)
        if self.plan.on_gpu and self.replan is not None:
            measured = self.reports[0]["pool"].get("measured_bytes") or {}
            if measured:
                revised = self.replan(measured)
                # rank 0 already runs on its device: a revision must keep it there
                if revised.workers < self.plan.workers and revised.devices[0] == self.plan.devices[0]:
                    self.log(f"plan revised with the measured model footprint: {revised.workers} "
                             f"worker(s) instead of {self.plan.workers}\n{revised.describe()}")
                    self.plan = revised
                self.max_in_flight = min(self.max_in_flight, 2 * self.plan.workers)
        workers = [first] + [self._spawn(r, warm) for r in range(1, self.plan.workers)]
        for w in workers[1:]:
            self._await_ready(w)
        return workers

    def _stop(self, workers: list[_Worker]) -> None:
        for w in workers:
            try:
                send(w.conn, None)
            except (OSError, ValueError):
                pass
        for w in workers:
            w.proc.join(timeout=5)
            if w.proc.is_alive():
                w.proc.terminate()
                w.proc.join(timeout=5)
            w.conn.close()

    # -- the dispatch loop ------------------------------------------------------------------
    def _loop(self, workers: list[_Worker], batches: Iterator[list[Item]]) -> Iterator[BatchResult]:
        n_ops = len(self.chain.ops)
        ready: deque[_Task] = deque()
        tasks: dict[int, _Task] = {}
        remaining: dict[int, int] = {}        # batch_no -> items not yet accounted for
        parts: dict[int, list] = {}           # batch_no -> [(first position, BatchResult)]
        next_batch, next_emit, exhausted = 0, 0, False
        while True:
            while next_emit in remaining and remaining[next_emit] == 0:
                done = sorted(parts.pop(next_emit), key=lambda p: p[0])
                del remaining[next_emit]
                next_emit += 1
                yield BatchResult.merge([p for _, p in done], n_ops)
            while not exhausted and next_batch - next_emit < self.max_in_flight:
                items = next(batches, None)
                if items is None:
                    exhausted = True
                    break
                task = _Task(next(self._ids), next_batch, items)
                tasks[task.id] = task
                remaining[next_batch], parts[next_batch] = len(items), []
                ready.append(task)
                next_batch += 1
            if exhausted and next_emit == next_batch:
                return
            for w in workers:
                while ready and len(w.tasks) < PREFETCH:
                    task = ready.popleft()
                    w.tasks.append(task.id)  # a dead worker's tasks are requeued by _replace
                    try:
                        send(w.conn, (task.id, task.items))
                    except OSError:
                        break  # it died: its sentinel is ready, the wait below sees it
            conns = {w.conn: w for w in workers}
            sentinels = {w.proc.sentinel: w for w in workers}
            for obj in wait(list(conns) + list(sentinels)):
                w = conns.get(obj) or sentinels.get(obj)
                if obj in conns:
                    try:
                        msg = recv(w.conn)
                    except (EOFError, OSError):
                        continue  # the sentinel reports the death
                    self._on_message(w, msg, tasks, remaining, parts)
                elif w.proc.exitcode is not None and w in workers:
                    self._drain(w, tasks, remaining, parts)
                    workers[workers.index(w)] = self._replace(w, tasks, ready, remaining, parts)
                    break  # the wait list changed

    def _on_message(self, w, msg, tasks, remaining, parts) -> None:
        kind, task_id = msg[0], msg[1]
        if kind == "ok":
            task = tasks.pop(task_id)
            w.tasks.remove(task_id)
            result, report = msg[2], msg[3]
            self.reports[w.rank] = report
            parts[task.batch_no].append((task.items[0].pos, result))
            remaining[task.batch_no] -= len(task.items)
        elif kind == "fail":
            raise FailFast(msg[2])
        else:
            raise DjxError(f"worker {w.rank} hit an internal error (a bug, please report it): {msg[2]}")

    def _drain(self, w, tasks, remaining, parts) -> None:
        """Take results the dead worker sent before it died."""
        while True:
            try:
                if not w.conn.poll():
                    return
                msg = recv(w.conn)
            except (EOFError, OSError):
                return
            self._on_message(w, msg, tasks, remaining, parts)

    def _replace(self, dead: _Worker, tasks, ready, remaining, parts) -> _Worker:
        """Restart a dead worker; retry, bisect or reject the batch it was running."""
        self.restarts += 1
        code = dead.proc.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        dead.conn.close()
        queued = [tasks[t] for t in dead.tasks]
        running_id, op_index = dead.status[0], dead.status[1]
        if queued and queued[0].id == running_id:
            running, rest = queued[0], queued[1:]
        else:  # died before it picked up its first queued task: nothing is to blame
            running, rest = None, queued
        if self.restarts > 50 + 4 * len(tasks):
            raise DjxError(f"workers keep dying ({self.restarts} restarts, last by {how}); stopping")
        for t in reversed(rest):
            ready.appendleft(t)
        if running is not None:
            op = self.chain.ops[op_index].name if 0 <= op_index < len(self.chain.ops) else "startup"
            running.deaths += 1
            del tasks[running.id]
            if len(running.items) == 1 and (running.deaths >= 2 or running.bisected):
                item = running.items[0]
                if item.pending:  # the worker parsed it; here we only had the line
                    parse_pending([item])
                res = BatchResult(op_counts=[[0, 0, 0, 0, 0.0] for _ in self.chain.ops])
                # the record every rejection gets (raises FailFast under on_error: fail)
                self.chain.reject(res, item.pos, item.line, op, f"worker died while running {op} ({how})",
                                  "worker_died", item=item, file=item.file)
                parts[running.batch_no].append((item.pos, res))
                remaining[running.batch_no] -= 1
            elif running.deaths >= 2 or running.bisected:
                mid = len(running.items) // 2
                for half in (running.items[mid:], running.items[:mid]):
                    t = _Task(next(self._ids), running.batch_no, half, 1, True)
                    tasks[t.id] = t
                    ready.appendleft(t)
            else:
                retry = _Task(next(self._ids), running.batch_no, running.items, running.deaths)
                tasks[retry.id] = retry
                ready.appendleft(retry)
        fresh = self._spawn(dead.rank, bool(self.chain.model_specs()))
        self._await_ready(fresh)
        return fresh
