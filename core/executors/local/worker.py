"""A local worker process and the messages on its pipe. It binds itself (see process.py), then
runs the batches sent to it until told to stop, reporting each result with its WorkerReport."""
from __future__ import annotations

import ctypes
import os
import pickle
import queue
import threading
import time
import traceback
from dataclasses import dataclass

from djx.core.errors import DjxError
from djx.core.records import BatchResult, FailFast, Item, WorkerReport


# -- parent -> worker: a Task, or None to stop. worker -> parent: one of the others --------------

@dataclass
class Task:
    id: int
    items: list[Item]


@dataclass
class Ready:
    rank: int
    report: WorkerReport


@dataclass
class StartFailed:
    rank: int
    message: str
    user_error: bool  # a DjxError (bad model path, plug-in import): its message says it all


@dataclass
class Done:
    task_id: int
    result: BatchResult
    report: WorkerReport


@dataclass
class Failed:
    """on_error: fail, and a sample of the task was bad."""
    task_id: int
    message: str


@dataclass
class Crashed:
    """An unexpected exception outside any one sample (a bug)."""
    task_id: int
    message: str


class Status(ctypes.Structure):
    """Shared with the parent, so it knows what a worker is doing (task, op, since when: the
    watchdog's clock) and what it was doing when it died."""
    _fields_ = [("task_id", ctypes.c_longlong), ("op_index", ctypes.c_longlong), ("since", ctypes.c_double)]


def send(conn, obj) -> None:
    """Pipe messages go through the C pickler: multiprocess's default (dill, pure Python) costs
    ~0.4 ms per sample and made the parent the bottleneck at np > 1."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn):
    return pickle.loads(conn.recv_bytes())


def _read_on_a_thread(conn) -> queue.Queue:
    """Tasks from the parent, read as they come: a worker sending a large result while the parent
    sends it a large task would otherwise deadlock on two full pipes. (The parent queues at most
    its lanes + 1 tasks per worker, so this holds at most that many.)"""
    inbox: queue.Queue = queue.Queue()

    def read() -> None:
        while True:
            try:
                msg = recv(conn)
            except (EOFError, OSError):
                msg = None
            inbox.put(msg)
            if msg is None:
                return

    threading.Thread(target=read, name="djx-inbox", daemon=True).start()
    return inbox


def worker_main(setup, rank: int, conn, status: Status, parent: int | None) -> None:
    """Entry point of one worker (`setup`: a WorkerSetup); `status` tells the parent which task and
    op it is in; `parent`: the run's pid (None: a forkserver's child, which dies with the run)."""
    from djx.core.executors.process import die_with_parent, set_thread_env
    entered = time.time()  # the start-up's parts (summary: timing.startup_parts)
    parent = os.getppid() if parent is None else parent  # None: a forkserver's child, which dies with the run
    die_with_parent(parent)  # even mid-sample: a killed run leaves no worker behind
    set_thread_env(setup.threads)  # before anything imports torch
    try:
        from djx.core.executors.process import bind_process
        from djx.core.io.writers import encode_line
        chain, pool = bind_process(setup)
        pool.setup.update(entered_at=entered, ready_at=time.time())
        started = Ready(rank, pool.report())
    except DjxError as e:
        started = StartFailed(rank, str(e), True)
    except BaseException as e:  # noqa: BLE001  (reported to the parent, which stops the run)
        started = StartFailed(rank, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}", False)
    if not _tell(conn, started) or isinstance(started, StartFailed):
        return

    from djx.core.executors.local.lanes import Lanes
    from djx.core.plan.resources import PeakUss
    peak = PeakUss()
    lanes = Lanes(setup.lanes, status)
    pool.waiting = lanes.waiting  # a lane waiting for its device's scorer lets the next batch be prepared
    inbox = _read_on_a_thread(conn)
    sending = threading.Lock()
    gone = threading.Event()  # the parent is gone (a send failed) or told this worker to stop

    def lane() -> None:
        while not gone.is_set():
            task = inbox.get()
            if task is None:
                inbox.put(None)  # for the other lanes
                gone.set()
                return
            with lanes.working(task.id):
                try:
                    result = chain.run(task.items, pool, lanes.on_op, encode=encode_line)
                    answer = Done(task.id, result, pool.report(peak))
                except FailFast as e:
                    answer = Failed(task.id, str(e))
                except BaseException as e:  # noqa: BLE001
                    answer = Crashed(task.id, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")
                with sending:
                    if not _tell(conn, answer):
                        gone.set()

    threads = [threading.Thread(target=lane, name=f"djx-lane-{i}", daemon=True) for i in range(lanes.n)]
    for t in threads:
        t.start()
    while not gone.wait(1.0):
        if os.getppid() != parent:  # the parent was killed (kill -9): do not linger
            return
    for t in threads:  # told to stop: every task was answered; a lane still in one ends with the process
        t.join(timeout=5)


def _tell(conn, msg) -> bool:
    """Send to the parent; False (quietly) when it is gone, e.g. killed with kill -9: a dying
    worker has no one to report to, and a traceback about the closed pipe would only mislead."""
    try:
        send(conn, msg)
        return True
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return False
