"""One copy of each model per GPU: a weight owner process per device (with `scoring: device`, also
the device's scorer: scoring.py).

GPU memory cannot be shared through files. The owner of a device loads each model there once and
hands every worker bound to the same device CUDA IPC handles of its tensors (torch's own tensor
reductions, pickled with the ForkingPickler that torch registers them in); the worker rebuilds the
model around them without a copy, so N workers on a GPU hold one set of weights plus their own
activations.

- The owner must outlive the workers that map its memory: the run starts it before the workers and
  stops it after them, and it dies with the run (kill -9 included).
- A worker that dies is replaced by the executor; the new one maps the same copy again.
- An owner that dies is restarted by the executor at the same address. Workers that already hold a
  mapping keep valid memory (the driver frees an exported block only once every importer has let
  go, measured on an H100); workers that ask while it is down retry until the new one answers.

On CPU (which runs use only in tests, so that this code runs on machines without a GPU) the owner
saves its copy once in the run folder and workers memory-map it; CPU runs otherwise use the run
folder directly (folder.py).
"""
from __future__ import annotations

import io
import os
import pickle
import threading
import time
from dataclasses import dataclass

CONNECT_SECONDS = 120.0  # how long a worker waits for an owner (restarting) before giving up


class WeightOwners:
    """The owner processes of one run, one per device: started before the workers, restarted
    when one dies (at the same address), stopped after the workers."""

    MAX_RESTARTS = 10

    def __init__(self, custom_ops: tuple, base_dir: str, log, main_importable, threads: int = 1):
        self.custom_ops, self.base_dir, self.log = custom_ops, base_dir, log
        self.threads = threads  # torch threads of an owner (its scoring: more would fight the workers)
        self._main_importable = main_importable  # the executor's guard for spawning from a script
        self.addresses: dict = {}  # device -> OwnerAddress
        self.procs: dict = {}      # device -> its owner process
        self.restarts = 0
        self.preload: tuple = ()  # model specs each owner's scorer loads at its start

    def start(self, folder: str, devices, preload: tuple = ()) -> dict:
        """Start an owner for each device; the addresses workers find them at. `preload`: the
        model specs each owner's scorer loads at once (scoring: device)."""
        self.preload = tuple(preload)
        for i, device in enumerate(devices):
            self.addresses[device] = OwnerAddress(os.path.join(folder, f"owner-{i}.sock"), os.urandom(16))
            self._start(device)
        return dict(self.addresses)

    def _start(self, device: str) -> None:
        """Start it without waiting: it imports torch while the workers do, and a worker waits
        until it listens (a death is seen by the executor through its sentinel)."""
        import multiprocess as mp
        ctx = mp.get_context("spawn")  # a clean process: CUDA cannot be used in a forked one
        proc = ctx.Process(target=owner_main, name=f"djx-weights-{device}", daemon=True,
                           args=(device, self.addresses[device], self.custom_ops, self.base_dir, os.getpid(),
                                 self.threads, self.preload))
        with self._main_importable():
            proc.start()
        self.procs[device] = proc

    def sentinels(self) -> list:
        """The owners' sentinels, for the executor's wait list."""
        return [proc.sentinel for proc in self.procs.values()]

    def restart_dead(self, ready) -> bool:
        """Restart each owner whose sentinel is among `ready` (what a wait returned); whether any."""
        dead = [d for d, proc in self.procs.items() if proc.sentinel in ready]
        for device in dead:
            self.restart(device)
        return bool(dead)

    def restart(self, device: str) -> None:
        """An owner died: start a new one at the same address. Workers holding its memory keep it
        (the driver frees it after the last importer); workers started later map the new copy."""
        from djx.core.errors import DjxError
        dead = self.procs.pop(device)
        dead.join(5)
        self.restarts += 1
        if self.restarts > self.MAX_RESTARTS:
            raise DjxError(f"the weight owner of {device} keeps dying ({self.restarts} restarts, "
                           f"last exit code {dead.exitcode}); stopping")
        self.log(f"the weight owner of {device} died (exit code {dead.exitcode}); restarting it")
        self._start(device)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.kill()  # after the workers: nobody maps its memory any more
        for proc in self.procs.values():
            proc.join(timeout=5)
        self.procs = {}


@dataclass(frozen=True)
class OwnerAddress:
    path: str      # its unix socket, in the run folder
    authkey: bytes


def _dumps(obj) -> bytes:
    """Pickled with the reductions torch registers for tensors: CUDA tensors travel as IPC
    handles (never as copies of their bytes)."""
    import importlib
    from multiprocessing.reduction import ForkingPickler
    importlib.import_module("torch.multiprocessing")  # registers the tensor reductions
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def owner_main(device: str, address: OwnerAddress, custom_ops: tuple, base_dir: str, parent: int,
               threads: int = 1, preload: tuple = ()) -> None:
    """The owner's process: bind the device, load the plug-ins (their model loaders), listen, then
    answer each worker's (spec) with (skeleton, tensors) of one copy loaded here once. `preload`:
    the specs its scorer scores with (scoring: device), loaded at once while the workers start
    instead of when the first worker asks."""
    from multiprocessing.connection import Listener

    from djx.core.executors.process import die_with_parent, set_thread_env
    from djx.core.models.share.scoring import ScoringDesk
    from djx.core.op.registry import load_run_ops
    timeline = {"scorer_entered_at": time.time()}  # the start-up's instants (the summary's startup_parts)
    die_with_parent(parent)
    _name_process(b"djx-weights")  # what ps, top and nvidia-smi users look for
    set_thread_env(threads)
    import torch
    torch.set_num_threads(threads)
    device_ready = _make_context(device, timeline) if device.startswith("cuda") else None
    load_run_ops(custom_ops, base_dir)
    if os.path.exists(address.path):
        os.unlink(address.path)  # a dead owner's socket
    listener = Listener(address.path, "AF_UNIX", backlog=64, authkey=address.authkey)  # workers retry until it listens
    models: dict = {}
    lock = threading.Lock()
    timeline["scorer_imported_at"] = time.time()
    desk = ScoringDesk(device, timeline)  # scoring: device (scoring.py)
    if preload:
        desk.preload(preload)  # its loading waits for the device's context where it is not made yet
    if device_ready is not None:
        device_ready.join()
        torch.cuda.set_device(device)  # this thread's device (the context is made)

    def serve(conn) -> None:
        inbox = desk.inbox()  # this connection's shared buffer
        try:
            while True:
                spec = pickle.loads(conn.recv_bytes())
                if desk.answer(spec, conn, inbox):
                    continue
                with lock:
                    if spec not in models:
                        models[spec] = _load(spec, device, f"{address.path}.{os.getpid()}.{len(models)}.pt")
                conn.send_bytes(_dumps(models[spec]))
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError):  # a client that failed the handshake
            continue
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def _make_context(device: str, timeline: dict) -> threading.Thread:
    """A thread that makes the device's CUDA context (seconds on a large GPU) while this process
    imports the ops and their model code, which hold the interpreter while the context's making
    does not; `scorer_device_at` in `timeline` once made. A device that fails is left to the
    loading, which says why."""
    def make() -> None:
        import torch
        try:
            torch.cuda.set_device(device)
            torch.empty(1, device=device)
        except Exception:  # noqa: BLE001  (the model's loading on this device reports it)
            return
        timeline["scorer_device_at"] = time.time()
    thread = threading.Thread(target=make, name="djx-cuda-context", daemon=True)
    thread.start()
    return thread


def _name_process(name: bytes) -> None:
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, name, 0, 0, 0)  # PR_SET_NAME (Linux)
    except (OSError, AttributeError):
        pass


def _load(spec, device: str, path: str) -> tuple:
    """("ok", skeleton, tensors) of one copy of the model on a GPU; ("file", skeleton, path) on
    CPU, the tensors saved once to `path` (in the run folder) for workers to memory-map;
    ("private", why) when it cannot be shared (its loader's result does not pickle); ("error",
    message, user_error) on failure."""
    from djx.core.errors import DjxError
    from djx.core.models.pool import loader_for
    from djx.core.models.share.split import split
    try:
        obj = loader_for(spec)(spec, device)
    except DjxError as e:
        return ("error", str(e), True)
    except Exception as e:  # noqa: BLE001  (sent to the worker, which reports it)
        return ("error", f"{type(e).__name__}: {e}", False)
    try:
        skeleton, tensors = split(obj)
    except pickle.PicklingError as e:
        return ("private", str(e))
    if device.startswith("cuda"):
        import torch
        torch.cuda.empty_cache()  # the loader's temporaries: this process keeps only the weights
        return ("ok", skeleton, tensors)
    import torch
    torch.save(tensors, path + ".tmp")  # a new file: a dead owner's may still be mapped
    os.replace(path + ".tmp", path)
    return ("file", skeleton, path)


def load_from_owner(address: OwnerAddress, loader, spec, device: str):
    """`spec`'s model on `device`, its weights mapped from the owner's copy. Waits for an owner
    that is (re)starting; loads a private copy where the model cannot be shared."""
    from multiprocessing.connection import Client

    from djx.core.errors import DjxError
    from djx.core.models.share.split import join
    deadline = time.monotonic() + CONNECT_SECONDS
    last = None
    while time.monotonic() < deadline:
        try:
            with Client(address.path, "AF_UNIX", authkey=address.authkey) as conn:
                conn.send_bytes(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
                answer = pickle.loads(conn.recv_bytes())
        except (OSError, EOFError, RuntimeError) as e:
            # not listening yet, restarting, or it died between answering and our mapping
            last = e
            time.sleep(0.1)
            continue
        if answer[0] == "ok":
            return join(answer[1], answer[2])
        if answer[0] == "file":
            import torch
            return join(answer[1], torch.load(answer[2], mmap=True, weights_only=True))
        if answer[0] == "private":
            return loader(spec, device)
        _, message, user_error = answer
        raise DjxError(message) if user_error else RuntimeError(f"the weight owner of {device}: {message}")
    raise DjxError(f"the weight owner of {device} did not answer for {CONNECT_SECONDS:g} s "
                   f"(last: {type(last).__name__}: {last})")
