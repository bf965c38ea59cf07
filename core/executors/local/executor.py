"""Local executor: `np` worker processes, each running the whole op chain on one batch at a time.

Memory is bounded: at most `max_in_flight` batches are read ahead of the oldest unfinished one, whatever the
dataset size. Results come back in input order. A worker that dies (signal, segfault, OOM killer) is replaced;
its batch is retried once, then bisected until only the poison sample is left, which is rejected.

With `share_models`, the workers map one copy of each model per device: on CPU from the run folder
(models/share/folder.py), on a GPU from that device's weight owner process (share/gpu_owner.py), which this
executor starts before the workers, restarts when it dies and stops after them. With `scoring: device`
that owner also scores for every worker of its device (share/scoring.py)."""
from __future__ import annotations

import itertools
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import dill
import multiprocess as mp
from multiprocess.connection import wait

from djx.core.run.chain import OpChain
from djx.core.errors import DjxError
from djx.core.executors.base import InputBatch
from djx.core.executors.process import WorkerSetup, main_importable as _main_importable, takes_part
from djx.core.executors.local.inflight import InFlight, Job
from djx.core.executors.local.poison import after_death
from djx.core.executors.local.worker import (Crashed, Done, Failed, Ready, StartFailed, Status, Task, recv, send,
                                       worker_main)
from djx.core.models.pool import preload_modules
from djx.core.plan.planner import Plan
from djx.core.plan.resources import read_again
from djx.core.records import BatchResult, FailFast, WorkerReport
from djx.core.run.stop import RUN_SAVED
from djx.core.models.share.folder import create_run_folder, remove_run_folder
from djx.core.models.share.weight_share import WeightShare
from djx.core.models.share.gpu_owner import WeightOwners

LANES = 3  # tasks a worker runs at once when it waits on its device's scorer (lanes.py): two left the
# simulated device (tools/bench_throughput.py) at 0.59x of the rate the workers prepare at, three reached 0.91x
READ_AHEAD = 4  # the default read window, in multiples of the batches the workers hold (_read_window)


@dataclass
class _Worker:
    rank: int
    proc: object
    conn: object
    status: Status
    jobs: deque = field(default_factory=deque)  # ids of the jobs sent to it, oldest first
    timed_out: bool = False                     # the watchdog killed it


class LocalExecutor:
    def __init__(self, chain: OpChain, plan: Plan, start_method: str = "spawn",
                 custom_ops: tuple = (), base_dir: str = ".", max_in_flight: int | None = None,
                 replan=None, log=print, sample_timeout: float = 600.0, share_models: bool = True,
                 owner_on_cpu: bool = False, scoring: str = "workers"):
        self.chain = chain
        self.plan = plan
        self.replan = replan  # measured model bytes -> Plan (GPU runs revise the plan after rank 0)
        self.log = log
        self.mp = mp.get_context(start_method)
        self._forkserver = start_method == "forkserver"  # workers are the server's children, not ours
        if self._forkserver and chain.model_specs():  # imported once, shared by the forked workers (preload.py)
            here = "djx.core.executors.local."
            self.mp.set_forkserver_preload([here + "preload", *preload_modules(chain.model_specs()), here + "freeze_heap"])
        self.custom_ops = tuple(custom_ops)
        self.base_dir = base_dir
        self.scoring = scoring if any(takes_part(op) for op in chain.ops) else "workers"
        # a worker waiting on its device's scorer prepares its next batch meanwhile; each worker
        # has one task queued beyond those it runs, so it never idles between batches
        self.lanes = LANES if self.scoring == "device" else 1
        self.max_in_flight = max_in_flight or self._read_window(plan.workers)
        self.sample_timeout = sample_timeout  # an op call making no progress this long is killed
        self.reports: dict[int, WorkerReport] = {}  # rank -> its last report
        self.restarts = 0
        self._chain_bytes = dill.dumps(chain)
        self._ids = itertools.count()
        self.share_models = (share_models or self.scoring == "device") and bool(chain.model_specs())
        self._share = None  # WeightShare of the run's folder and owners, while it runs
        self._owned = tuple(d for d in dict.fromkeys(plan.devices)  # owners serve (and score on): GPUs; tests: CPU
                            if owner_on_cpu or self.scoring == "device" or d.startswith("cuda"))
        self._owners = WeightOwners(self.custom_ops, self.base_dir, log, _main_importable, plan.threads_per_worker)
        self._halt: list = []  # the run's Stop, while it runs: waits wake for it
        self.started_at = self.ready_at = None  # wall clock: run() began, every worker was ready

    def run(self, source: Iterable[InputBatch], stop=None) -> Iterator[BatchResult]:
        """One BatchResult per input batch, in input order; Stopped once `stop` is requested
        (the waits wake for it: a batch held in an op does not delay it)."""
        workers: list[_Worker] = []
        self._halt = [] if stop is None else [stop]
        self.started_at = time.time()  # the start-up's parts (run/breakdown.py: startup_parts)
        try:
            if self.share_models:  # one copy of each model's weights per device
                folder = create_run_folder()
                scored = tuple(dict.fromkeys(s for op in self.chain.ops if self.scoring == "device" and takes_part(op)
                                             for s in op.model_specs()))  # the scorers load them at once
                self._share = WeightShare(folder=folder, owners=self._owners.start(folder, self._owned, scored))
            workers = self._start_all()
            self.ready_at = time.time()
            yield from self._loop(workers, iter(source))
        finally:
            self._stop(workers)
            self._owners.stop()
            remove_run_folder(self._share and self._share.folder)

    def _read_window(self, workers: int) -> int:
        """Batches read ahead of the oldest unfinished one, by default: READ_AHEAD times what the
        workers hold (lanes + 1 each). Results are emitted in input order, so a window of only what
        the workers hold stops every worker whenever the oldest batch is slow (a batch's lane
        waiting for the core, a large image): the others finish theirs and get no more."""
        return READ_AHEAD * (self.lanes + 1) * workers

    # -- worker lifecycle -------------------------------------------------------------------
    def _spawn(self, rank: int, warmup: bool) -> _Worker:
        parent, child = self.mp.Pipe()
        status = self.mp.Value(Status, -1, -1, 0.0, lock=False)
        setup = WorkerSetup(self._chain_bytes, self.plan.devices[rank], self.plan.threads_per_worker,
                            self.custom_ops, self.base_dir, self.plan.mem_fraction[rank] if self.plan.mem_fraction
                            else 0.0, self._share, warmup, self.scoring, lanes=self.lanes)
        proc = self.mp.Process(target=worker_main, name=f"djx-worker-{rank}", daemon=True,
                               args=(setup, rank, child, status, None if self._forkserver else os.getpid()))
        with _main_importable():
            proc.start()
        child.close()
        return _Worker(rank, proc, parent, status)

    def _await_ready(self, w: _Worker) -> None:
        while True:  # a worker that maps a dead owner's weights waits for its restart
            ready = wait([w.conn] + self._owners.sentinels() + self._halt)
            self._stop_if_asked(ready)
            self._owners.restart_dead(ready)
            if w.conn in ready:
                break
        try:
            msg = recv(w.conn)
        except EOFError:
            from djx.core.plan.preflight import unguarded_main_hint
            raise DjxError(f"worker {w.rank} died while starting (exit code {w.proc.exitcode})"
                           + unguarded_main_hint()) from None
        if isinstance(msg, StartFailed):
            raise DjxError(msg.message if msg.user_error else f"worker {w.rank} failed to start: {msg.message}")
        if not isinstance(msg, Ready):
            raise DjxError(f"worker {w.rank} sent {type(msg).__name__} before Ready (a bug, please report it)")
        self.reports[w.rank] = msg.report

    def _start_all(self) -> list[_Worker]:
        """Start every worker at once; only where workers load models on a GPU does rank 0 go
        first, so that the footprint it measures can revise the plan before the others start."""
        warm, first = bool(self.chain.model_specs()), []
        if self.plan.workers_touch_gpu and self.replan is not None:
            first = [self._spawn(0, warm)]
            self._await_ready(first[0])
            measured = self.reports[0].measured_bytes
            revised = self.replan(measured) if measured else self.plan
            # rank 0 already runs on its device: a revision must keep it there
            if revised.workers < self.plan.workers and revised.devices[0] == self.plan.devices[0]:
                self.log(f"plan revised with the measured model footprint: {revised.workers} "
                         f"worker(s) instead of {self.plan.workers}\n{revised.describe()}")
                self.plan = revised
            self.max_in_flight = min(self.max_in_flight, self._read_window(self.plan.workers))
        rest = [self._spawn(r, warm) for r in range(len(first), self.plan.workers)]
        for w in rest:
            self._await_ready(w)
        return first + rest

    def _stop(self, workers: list[_Worker]) -> None:
        if not any(h.requested for h in self._halt):  # memory at the end: all at one moment, all still alive
            self.reports.update({w.rank: read_again(self.reports[w.rank], w.proc.pid) for w in workers if w.rank in self.reports})
        for w in workers:
            try:
                send(w.conn, None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (0 if any(h.requested for h in self._halt) else 5)  # for all, not each
        for w in workers:
            w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()  # workers ignore SIGTERM (see die_with_parent)
                w.proc.join(timeout=5)
            w.conn.close()

    # -- the dispatch loop ------------------------------------------------------------------
    def _loop(self, workers: list[_Worker], batches: Iterator[InputBatch]) -> Iterator[BatchResult]:
        n_ops = len(self.chain.ops)
        inflight = InFlight()
        next_batch, next_emit, exhausted = 0, 0, False
        while True:
            while (done := inflight.pop_complete(next_emit, n_ops)) is not None:
                next_emit += 1
                yield done
            while not exhausted and next_batch - next_emit < self.max_in_flight:
                batch = next(batches, None)
                if batch is None:
                    exhausted = True
                    break
                job = Job(Task(next(self._ids), batch.items), next_batch)
                inflight.jobs[job.task.id] = job
                inflight.missing[next_batch], inflight.parts[next_batch] = len(batch.items), []
                inflight.read_at[next_batch] = batch.read_at
                inflight.ready.append(job)
                next_batch += 1
            if exhausted and next_emit == next_batch:
                return
            for w in workers:
                while inflight.ready and len(w.jobs) < self.lanes + 1:
                    job = inflight.ready.popleft()
                    w.jobs.append(job.task.id)  # a dead worker's jobs are requeued by _replace
                    try:
                        send(w.conn, job.task)
                    except OSError:
                        break  # it died: its sentinel is ready, the wait below sees it
            conns = {w.conn: w for w in workers}
            sentinels = {w.proc.sentinel: w for w in workers}
            ready = wait(list(conns) + list(sentinels) + self._owners.sentinels() + self._halt,
                         timeout=self._kill_stuck(workers))
            self._stop_if_asked(ready)
            if self._owners.restart_dead(ready):
                continue  # the wait list changed
            for obj in ready:
                w = conns.get(obj) or sentinels.get(obj)
                if obj in conns:
                    try:
                        msg = recv(w.conn)
                    except (EOFError, OSError):
                        continue  # the sentinel reports the death
                    self._on_message(w, msg, inflight)
                elif w.proc.exitcode is not None and w in workers:
                    self._drain(w, inflight)
                    workers[workers.index(w)] = self._replace(w, inflight)
                    break  # the wait list changed

    def _stop_if_asked(self, ready: list) -> None:  # Stopped, when the run's Stop woke the wait
        for stop in self._halt:
            if stop in ready:
                stop.check(RUN_SAVED)

    def _kill_stuck(self, workers: list[_Worker]) -> float:
        """Kill the workers stuck in an op call past sample_timeout; the seconds until the next one could be."""
        now, wake = time.monotonic(), self.sample_timeout
        for w in workers:
            if w.status.task_id not in w.jobs or w.timed_out:  # not computing one of its tasks
                continue
            left = w.status.since + self.sample_timeout - now
            if left <= 0:
                w.timed_out = True
                w.proc.kill()
            else:
                wake = min(wake, left)
        return max(wake, 0.05)

    def _on_message(self, w: _Worker, msg, inflight: InFlight) -> None:
        if isinstance(msg, Done):
            job = inflight.jobs.pop(msg.task_id)
            w.jobs.remove(msg.task_id)
            self.reports[w.rank] = msg.report
            inflight.add_part(job.batch_no, job.task.items[0].pos, msg.result, len(job.task.items))
        elif isinstance(msg, Failed):
            raise FailFast(msg.message)
        elif isinstance(msg, Crashed):
            raise DjxError(f"worker {w.rank} hit an internal error (a bug, please report it): {msg.message}")

    def _drain(self, w: _Worker, inflight: InFlight) -> None:
        """Take results the dead worker sent before it died."""
        while True:
            try:
                if not w.conn.poll():
                    return
                msg = recv(w.conn)
            except (EOFError, OSError):
                return
            self._on_message(w, msg, inflight)

    def _replace(self, dead: _Worker, inflight: InFlight) -> _Worker:
        """Restart a dead worker; retry, bisect or reject the job it was running."""
        self.restarts += 1
        code = dead.proc.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if dead.timed_out:
            how = f"no progress for {self.sample_timeout:g} s (sample_timeout); stopped"
        dead.conn.close()
        queued = [inflight.jobs[j] for j in dead.jobs]
        # the job it was computing is to blame (with lanes, the others only waited for the device);
        # none when it died before it picked one up
        running = next((job for job in queued if job.task.id == dead.status.task_id), None)
        rest = [job for job in queued if job is not running]
        if self.restarts > 50 + 4 * len(inflight.jobs):
            raise DjxError(f"workers keep dying ({self.restarts} restarts, last by {how}); stopping")
        inflight.ready.extendleft(reversed(rest))
        if running is not None:
            del inflight.jobs[running.task.id]
            running.deaths += 1
            after_death(running, dead.status.op_index, how, inflight, dead.timed_out, self.chain,
                        lambda: next(self._ids))
        fresh = self._spawn(dead.rank, bool(self.chain.model_specs()))
        self._await_ready(fresh)
        return fresh
