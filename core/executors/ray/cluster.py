"""Ray as djx meets it: starting or joining a cluster, refusing what the Ray engine cannot read
before Ray starts, and Ray's errors said in djx's words."""
from __future__ import annotations

import importlib
import logging
import re
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager

import psutil

from djx.core.errors import DjxError
from djx.core.io.readers import ReadState
from djx.core.plan.resources import cpu_count
from djx.core.executors.ray.node_watch import alive
from djx.core.executors.ray.work_dir import empty_working_dir


class Ours:
    """A cluster `connect` started or joined: the caller shuts it down (`shut_down`). `processes`:
    those of a local cluster it started (its head's, the driver's children); `folder`: the empty
    working directory Ray was started from (work_dir.py), removed at the shutdown."""

    def __init__(self, processes: list, folder: str | None = None):
        self.processes, self.folder = processes, folder

    def shut_down(self, ray, lost: bool = False) -> None:
        """`lost`: the node this driver runs on died, and Ray would end this process at its next
        call: no call into Ray, only the folder goes."""
        try:
            if not lost:
                self._shut_down(ray)
        finally:
            if self.folder:
                shutil.rmtree(self.folder, ignore_errors=True)

    def _shut_down(self, ray) -> None:
        """ray.shutdown(). A local cluster's processes start with SIGTERM blocked (connect), so
        Ray's SIGTERM, a second's wait and SIGKILL cost a second per kind of process (5.4 s in
        all, measured): the moment Ray's SIGTERM is pending at one of them, it gets the SIGKILL
        Ray would send a second later, with what it started (the raylet's agents and workers),
        in Ray's own order; the command returns with none of them left."""
        if not self.processes:
            ray.shutdown()
            return
        started = {}  # process -> what it started, as the run ends
        for p in self.processes:
            try:
                started[p] = p.children(recursive=True)
            except psutil.Error:
                started[p] = []
        done = threading.Event()
        killer = threading.Thread(target=_kill_when_asked, args=(started, done), name="djx-ray-stop", daemon=True)
        killer.start()
        try:
            ray.shutdown()
        finally:
            done.set()
            killer.join()
            _kill([q for p, below in started.items() for q in (p, *below)])


def _kill_when_asked(started: dict, done: threading.Event) -> None:
    left = dict(started)
    while left and not done.wait(0.005):
        for p in [p for p in left if _term_pending(p.pid)]:
            _kill([p, *left.pop(p)], wait=False)


def _end_started(before: set) -> None:
    """Kill this process's children not in `before`, and all they started: each is first stopped
    (SIGSTOP), so that none starts another (a raylet its agents) while the tree is collected."""
    try:
        new = [p for p in psutil.Process().children() if p not in before]
    except psutil.Error:
        return
    tree = list(new)
    for p in new:
        try:
            p.suspend()
            tree += p.children(recursive=True)
        except psutil.Error:
            pass
    _kill(tree)


def _term_pending(pid: int) -> bool:
    """Whether a SIGTERM waits at process `pid` (Linux; elsewhere Ray's own wait runs its course)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("ShdPnd:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except (OSError, ValueError):
        pass
    return False


def _kill(processes: list, wait: bool = True, timeout: float = 10.0) -> None:
    """SIGKILL each process; with `wait`, until each has ended. Ended is gone or a zombie: the
    raylet's workers and agents, orphaned when it dies, are reaped by PID 1 in its own time (1.4 s
    on one machine, never where PID 1 reaps nothing), and a zombie holds nothing any more."""
    for p in processes:
        try:
            p.kill()
        except psutil.Error:
            pass
    if not wait:
        return
    pause, deadline = 0.001, time.monotonic() + timeout
    while processes and time.monotonic() < deadline:
        processes = [p for p in processes if alive(p)]
        if processes:
            time.sleep(pause)
            pause = min(2 * pause, 0.05)


def connect(ray, address: str | None, stop=None) -> Ours | None:
    """Join the cluster at `address`, or start a local one: what this call started or joined (the
    caller then shuts it down), None when this process was connected already.

    With a `stop` (the command line's), SIGTERM stays djx's: ray.init puts its own handler in place
    (exit 15, nothing saved), so the stop's handlers go back in after it. And a local cluster's
    processes (they share this process group) start with SIGTERM blocked, as Ray starts them with
    SIGINT blocked: a SIGTERM to the whole group (a scheduler, a terminal) reaches only the driver,
    which saves its work and shuts Ray down itself, instead of Ray dying under the run."""
    if ray.is_initialized():
        return None
    if address:
        refuse_unreachable(address)
    where = {"address": address} if address else {"num_cpus": cpu_count(), "include_dashboard": False}
    # the processes ray.init starts inherit the mask; a SIGTERM meanwhile waits for djx's handler
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM} if stop is not None else set())
    before = set(psutil.Process().children())
    folder = None
    try:
        with empty_working_dir() as folder:
            ray.init(**where, logging_level=logging.ERROR)
    except BaseException as e:  # a failed start, or a stop (Ctrl-C) while Ray starts
        if not address:  # what the local start began (its GCS, raylet, their agents) does not outlive it
            _end_started(before)
        if isinstance(e, (ConnectionError, RuntimeError, ValueError)):
            raise DjxError(f"cannot start or join Ray (ray_address: {address!r}): {explain(e)}") from None
        raise
    finally:
        if stop is not None:
            stop.install()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return Ours([] if address else [p for p in psutil.Process().children() if p not in before], folder)


@contextmanager
def importing_ray_data():
    """Import Ray Data (and djx's datasource on it) in a thread while the body runs: ray.init, which
    spends most of its 2-3 s waiting for the processes it starts. The import (0.7 CPU-seconds) was
    otherwise the larger part of the driver's start-up before Ray. The thread is joined on the way
    out. The two share one module (Ray's usage library), which imports nothing of the other's, so
    their import locks never wait on each other in a cycle. An import that fails here fails again,
    with its error, where the driver imports Ray Data after this."""
    importing = threading.Thread(target=_import_ray_data, name="djx-import-ray-data", daemon=True)
    importing.start()
    try:
        yield
    finally:
        importing.join()


def _import_ray_data() -> None:
    try:
        importlib.import_module("djx.core.executors.ray.jsonl_source")  # imports ray.data
    except Exception:  # said by the driver's own import after the join
        pass


def refuse_unreachable(address: str, timeout: float = 5.0) -> None:
    """Ray's client retries an address where nothing listens for minutes; say so in seconds.
    `auto` (a local cluster's address file) is left to Ray."""
    import socket
    from urllib.parse import urlsplit
    if address == "auto" or address.startswith("local"):
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise DjxError(f"ray_address {address!r}: expected host:port (e.g. 10.0.0.5:6379), ray://host:port or auto")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise DjxError(f"ray_address {address!r}: nothing answers at {host}:{port} ({e.strerror or e}); is the "
                       f"Ray head running (`ray start --head`), and is the port open from here?") from None


def refuse(files: list[str], state: ReadState) -> str:
    """What the Ray engine cannot read, said before Ray starts; what it cannot do later (resume a
    parquet input), as a note for the start of the run."""
    path = files[0]
    if path.lower().endswith(".json"):
        raise DjxError(f"{path}: the ray executor reads JSON Lines (.jsonl) or parquet; convert the "
                       f".json array to .jsonl (one object per line) or use executor: local")
    parquet = path.lower().endswith(".parquet")
    if parquet and state.records:
        raise DjxError(f"{path}: the ray executor resumes JSON Lines inputs, not parquet; finish this "
                       f"run with executor: local (it resumes it), or start over with --restart")
    if parquet and len(files) > 1:
        import pyarrow.parquet as pq
        if "path" in pq.read_schema(path).names:
            raise DjxError(f"{path}: a column named 'path' collides with the file names Ray adds to "
                           f"rows of a many-file parquet dataset; use executor: local")
    return ("note: the ray executor does not resume parquet inputs: a run stopped before its end is finished "
            "with --executor local (it resumes it), or started over with --restart") if parquet else ""


def settle_fsspec_http() -> None:
    """Ray lists input files on several threads, and each asks whether the filesystem is
    fsspec's HTTP one by importing fsspec.implementations.http, catching ModuleNotFoundError when
    its aiohttp is missing. Threads importing it at once see a half-imported module and raise a
    plain ImportError instead, which fails the read. When the module cannot be imported anyway,
    record that once (a None entry makes every later import raise ModuleNotFoundError)."""
    import importlib.util
    name = "fsspec.implementations.http"
    if name in sys.modules or importlib.util.find_spec("fsspec") is None:
        return
    if importlib.util.find_spec("aiohttp") is None:
        sys.modules[name] = None


def explain(e: BaseException) -> str:
    """Our own error from inside Ray's wrapping (a bad model path, a plug-in that does not
    import), what an actor's death means (a node out of memory: one line, what to lower), the last
    line of a remote traceback, or else the head of Ray's message."""
    ours = re.findall(r"^djx\.core\.errors\.\w+: (.+)$", str(e), re.MULTILINE)
    text = str(e).strip().splitlines()
    head = "\n".join(text[:12]) + ("\n..." if len(text) > 12 else "")
    if ours:
        return ours[-1]
    if node_memory(e):
        return ("Ray killed a stage actor because its node ran low on memory (Ray's memory monitor). The "
                "batches done so far are saved: lower batch_size (max_decoded_bytes for large images) or np, "
                "or give the node more memory, then run the same command again to resume")
    if type(e).__name__ in ("ActorDiedError", "ActorUnavailableError") and "creation task" not in str(e):
        return (f"actors kept dying on one batch, more often than its poison samples explain (a "
                f"segfault or the out-of-memory killer outside any one sample?). The batches done so far "
                f"are saved: run the same recipe with --executor local, which resumes from there and "
                f"rejects such samples; or lower batch_size if memory ran out. Ray said: {text[0]}")
    if "Traceback (most recent call last)" in str(e):  # a remote traceback: its last line says what
        said = [line for line in text if line.strip() and not line[0].isspace() and not line.startswith("Traceback")]
        return said[-1] if said else text[0]
    return head


def node_memory(e: BaseException) -> bool:
    """Whether `e` (or what it wraps: Ray Data re-raises as its own types) is Ray's memory
    monitor killing a worker because its node ran low on memory."""
    seen = 0
    while e is not None and seen < 8:
        if (type(e).__name__ == "OutOfMemoryError" and type(e).__module__.startswith("ray")) \
                or _NODE_MEMORY.search(str(e)):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


_NODE_MEMORY = re.compile(r"running low on memory|memory usage threshold|killed by the memory monitor", re.IGNORECASE)


# Ray Data's threads that last as long as the process: the prefetcher parks for good (but see
# _stopped_prefetcher), and the usage poller (Ray Data 2.5x, started by a process's first run) asks
# Prometheus every 10 s forever, over HTTP. Waiting for them cost a joining run 10 s at its end
LIFELONG_THREADS = frozenset({"Prefetcher", "data-usage-metrics-poller"})


def let_fetches_end(before: set, seconds: float = 10.0) -> None:
    """Ray Data's fetch threads still in Ray at its shutdown end the process (exit 1): give those
    started since `before` (but LIFELONG_THREADS) time to see the end of the iteration."""
    deadline = time.monotonic() + seconds
    for t in threading.enumerate():
        if t not in before and (_stopped_prefetcher(t) or t.name not in LIFELONG_THREADS):
            t.join(max(0.0, deadline - time.monotonic()))


def _stopped_prefetcher(thread: threading.Thread) -> bool:
    """Ray Data's per-iteration block prefetcher, never stopped by it (one more parked thread a run,
    and one woken after Ray's shutdown ends the process: exit 1), stopped while Ray is up."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    lock = getattr(owner, "_condition", None)
    if thread.name != "Prefetcher" or lock is None or not callable(getattr(owner, "stop", None)):
        return False  # not one, or another Ray Data's: left as it was
    with lock:
        owner._blocks = []
    owner.stop()
    return True

