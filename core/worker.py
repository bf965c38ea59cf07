"""The worker process: binds its device and thread count, re-imports plug-ins, rebuilds the op
chain from bytes, then runs batches sent over its pipe until told to stop."""
from __future__ import annotations

import os
import sys
import time
import traceback


import pickle

from .errors import DjxError


def send(conn, obj) -> None:
    """Pipe messages go through the C pickler: multiprocess's default (dill, pure Python) costs
    ~0.4 ms per sample and made the parent the bottleneck at np > 1."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn):
    return pickle.loads(conn.recv_bytes())


def worker_main(rank: int, device: str, threads: int, custom_ops: tuple, base_dir: str,
                chain_bytes: bytes, conn, status, warmup: bool, mem_fraction: float = 0.0) -> None:
    """Entry point of one worker. `status` is a shared int array: [task id, op index] in progress;
    `mem_fraction` caps this process's share of its GPU (0: no cap)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    try:
        import dill

        from .chain import FailFast
        from .model_pool import process_pool
        from .outputs import dumps
        from .registry import load_builtin_ops, load_custom_ops, load_entry_point_ops
        from .resources import peak_device_bytes, uss_bytes

        load_builtin_ops()
        load_custom_ops(custom_ops, base_dir)
        load_entry_point_ops()
        chain = dill.loads(chain_bytes)
        if "torch" in sys.modules or chain.model_specs():
            import torch
            torch.set_num_threads(threads)
            if device.startswith("cuda"):
                torch.cuda.set_device(device)
                if mem_fraction > 0:
                    torch.cuda.set_per_process_memory_fraction(min(mem_fraction, 1.0), device)
        pool = process_pool(device)
        if warmup:
            for spec in chain.model_specs():
                pool.get(spec)
        send(conn, ("ready", rank, pool.report()))
    except DjxError as e:  # a user error (bad model path, plug-in import): its message says it all
        send(conn, ("init_user_error", rank, str(e)))
        return
    except BaseException as e:  # noqa: BLE001  (reported to the parent, which stops the run)
        send(conn, ("init_error", rank, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"))
        return

    def on_op(k: int) -> None:
        status[1] = k

    peak_uss, sampled_at = uss_bytes(), time.monotonic()
    parent = os.getppid()
    while True:
        try:
            while not conn.poll(1.0):
                if os.getppid() != parent:  # the parent was killed (kill -9): do not linger
                    return
            msg = recv(conn)
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, items = msg
        status[0], status[1] = task_id, -1
        try:
            result = chain.run(items, pool, on_op).encode(dumps)
            if time.monotonic() - sampled_at > 1.0:  # reading smaps costs ms: sample, not every batch
                peak_uss, sampled_at = max(peak_uss, uss_bytes()), time.monotonic()
            send(conn, ("ok", task_id, result, {"pool": pool.report(), "peak_uss": peak_uss,
                                               "peak_device_bytes": peak_device_bytes(device)}))
        except FailFast as e:
            send(conn, ("fail", task_id, str(e)))
        except BaseException as e:  # noqa: BLE001
            send(conn, ("error", task_id, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"))

