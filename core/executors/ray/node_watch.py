"""The Ray node under the driver. When its raylet dies, Ray ends the driver process from C++ the
next time it touches the node's object store ("connection to the plasma store is failed. Terminate
the process"), exit code 1 and no Python exception: no checkpoint, no message. So the driver pulls
Ray's batches in a thread of its own while the main thread waits on them watching the raylet; when
it dies the run stops between batches with NodeLost, in the seconds before Ray ends the process."""
from __future__ import annotations

import ctypes
import logging
import queue
import threading
from typing import Iterator

import psutil

from djx.core.errors import DjxError
from djx.core.run.stop import RUN_SAVED

POLL_S = 0.2


class NodeLost(DjxError):
    """The raylet of the node the driver runs on died."""


def local_raylet(ray) -> psutil.Process | None:
    """The raylet process of the node this driver is connected to (None: a Ray client, or not found)."""
    try:
        socket = ray._private.worker._global_node.raylet_socket_name
    except AttributeError:
        return None
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "raylet" and f"--raylet_socket_name={socket}" in (p.info["cmdline"] or ()):
            return p
    return None


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def silence_ray_logs() -> None:
    """Ray's Python loggers, off for the rest of this (ending) process: with the node gone, Ray Data's
    threads and Ray's exit hook log tracebacks about it after djx has said what happened."""
    names = [n for n in logging.root.manager.loggerDict if n == "ray" or n.startswith("ray.")]
    for name in ["ray", *names]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def watched(batches, raylet: psutil.Process | None, stop=None, close_s: float = 60.0) -> Iterator:
    """The items of `batches`, pulled in a thread; NodeLost once `raylet` is gone and nothing more
    came; Stopped (`stop`, the command line's SIGTERM) between two items or while waiting for one.
    Errors of the pulling thread are raised here. Left early (a stop, a trial's limit, an error of
    the consumer), it has the thread close Ray's iterator, interrupting a wait for a batch that may
    not come soon (a held or slow one) as Ctrl-C would: Ray's iterator must not outlive the run's
    connection to Ray."""
    q: queue.Queue = queue.Queue(maxsize=2)
    leaving = threading.Event()

    def put(item) -> bool:
        while not leaving.is_set():
            try:
                q.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def pull() -> None:
        it = iter(batches)
        try:
            for b in it:
                if not put(("batch", b)):
                    break
            else:
                put(("end", None))
        except BaseException as e:  # noqa: BLE001  handed to the main thread, which raises it
            put(("error", e))
        finally:
            if leaving.is_set() and hasattr(it, "close"):
                it.close()

    puller = threading.Thread(target=pull, name="djx-ray-batches", daemon=True)
    puller.start()
    lost = False
    try:
        while True:
            if stop is not None:
                stop.check(RUN_SAVED)
            try:
                kind, value = q.get(timeout=POLL_S)
            except queue.Empty:
                if raylet is not None and not alive(raylet):
                    lost = True
                    raise NodeLost("raylet") from None
                continue
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        leaving.set()
        if not lost:  # with the node gone, any call into Ray may end this process: leave it be
            _close(puller, close_s)


def _close(puller: threading.Thread, seconds: float) -> None:
    """Let the pulling thread close Ray's iterator. One between batches sees `leaving` at once. One
    waiting for a stage actor's result waits in slices (stage_actors.py): an exit raised in it ends
    its wait there, and its iterators close on the way out. One waiting for the next parsed block
    waits on a queue that Ray Data's own "iter_threaded" thread fills from the executor (a blocking
    get no exception can reach): that thread polls, and an exit raised in it ends Ray Data's
    execution as Ctrl-C in a consumer does (the iteration then ends and the puller closes;
    SystemExit, which a thread ends on silently). No user code runs in those threads (the ops run
    in actors)."""
    puller.join(2 * POLL_S)
    if puller.is_alive():
        for t in threading.enumerate():
            if (t.name == "iter_threaded" or t is puller) and t.ident is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(SystemExit))
    puller.join(seconds)
