"""What every worker process does first, a local worker and a Ray actor alike: pin its thread
count, import the plug-ins, rebuild the op chain from bytes, bind torch to its device, and load
its models into the process's pool once."""
from __future__ import annotations

import os
import sys

import dill

from djx.core.run.chain import OpChain
from djx.core.models.pool import ModelPool, process_pool
from djx.core.op.registry import load_builtin_ops, load_custom_ops, load_entry_point_ops


def set_thread_env(threads: int) -> None:
    """Before torch is imported: its thread pools read these once."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux), so a worker stuck inside
    an op does not outlive a killed run; exit now if the parent is already gone."""
    import signal
    if sys.platform.startswith("linux"):
        import ctypes
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    # Ctrl-C and a scheduler's SIGTERM reach the whole process group: the run stops its workers
    # itself, after saving its progress; a worker that died of them first would look like a crash
    # and its samples would be retried or rejected as worker_died.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.getppid() != parent:
        os._exit(0)


def bind_process(chain_bytes: bytes, device: str, threads: int, custom_ops: tuple, base_dir: str,
                 mem_fraction: float = 0.0, warmup: bool = True, share=None) -> tuple[OpChain, ModelPool]:
    """The chain this process runs and its model pool, bound to `device` with `threads` torch
    threads; `mem_fraction` caps this process's share of its GPU (0: no cap); `share` (a
    WeightShare): where the pool maps the run's one copy of each model from (None: private)."""
    set_thread_env(threads)
    load_builtin_ops()  # plug-ins first: unpickling the chain needs their classes
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
    pool = process_pool(device, share)
    if warmup and not getattr(chain, "lazy_models", False):  # lazy: stats reused, maybe no model needed
        for spec in chain.model_specs():
            pool.get(spec)
    return chain, pool
