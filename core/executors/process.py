"""What every worker process does first, a local worker and a Ray actor alike: pin its thread
count, import the plug-ins, rebuild the op chain from bytes, bind torch to its device, and load
its models into the process's pool once."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass

import dill

from djx.core.run.chain import OpChain
from djx.core.models.pool import ModelPool, load_said, process_pool
from djx.core.models.share.score_client import takes_part
from djx.core.op.registry import load_run_ops


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


@dataclass(frozen=True)
class WorkerSetup:
    """What a process needs to become a worker (a local worker or a Ray actor), passed by value so
    that spawned processes get it too: the op chain as bytes (with its RunContext), where it runs,
    how many torch threads it uses, the plug-ins to import and where the model weights come from."""
    chain_bytes: bytes
    device: str = "cpu"
    threads: int = 1
    custom_ops: tuple = ()
    base_dir: str = "."           # custom_ops paths resolve against it
    mem_fraction: float = 0.0     # a cap on this process's share of its GPU (0: no cap)
    share: object = None          # a WeightShare: where the pool maps each model from (None: private)
    warmup: bool = True           # load the chain's models before the first batch
    scoring: str = "workers"      # "device": ops that can score through their device's scorer
    scorer: object = None         # with scoring "device": the client to score through (None: the device's owner)
    lanes: int = 1                # tasks a local worker runs at once (lanes.py): 2 when it waits on a scorer


def bind_process(setup: WorkerSetup, sys_path: list | tuple = ()) -> tuple[OpChain, ModelPool]:
    """The chain this process runs and its model pool, bound to the setup's device and threads
    (sys_path: import path entries a module plug-in needs, a Ray actor's from its driver)."""
    t0 = time.perf_counter()
    set_thread_env(setup.threads)
    load_run_ops(setup.custom_ops, setup.base_dir, sys_path)  # plug-ins first: unpickling the chain needs their classes
    chain = dill.loads(setup.chain_bytes)
    pool = process_pool(setup.device, setup.share, setup.scoring)
    if setup.scorer is not None:
        pool.use_scorer(setup.scorer)
    pool.setup["imports"] = time.perf_counter() - t0  # the ops, the plug-ins, the chain
    scorer = pool.scorer()  # scoring: device: the device's scorer holds the models of the ops it scores
    here = [op for op in chain.ops if op.model_specs() and not (scorer is not None and takes_part(op))]
    if "torch" in sys.modules or chain.model_specs():
        import torch
        torch.set_num_threads(setup.threads)
        if setup.device.startswith("cuda") and here:  # a worker that only prepares makes no CUDA context
            torch.cuda.set_device(setup.device)
            if setup.mem_fraction > 0:
                torch.cuda.set_per_process_memory_fraction(min(setup.mem_fraction, 1.0), setup.device)
    if setup.warmup and not getattr(chain, "lazy_models", False):  # lazy: stats reused, maybe no model needed
        for op in chain.ops:
            if any(op is h for h in here):
                for spec in op.model_specs():
                    _load(pool, op, spec)
            elif op.model_specs():  # its processor and tokenizer here while the scorer loads the weights
                t0 = time.perf_counter()
                op.host_side(pool)
                t1 = time.perf_counter()
                pool.setup.update(scorer.warm(op))  # the scorer has loaded the op's models
                pool.setup["host_side"] = pool.setup.get("host_side", 0.0) + t1 - t0
                pool.setup["scorer_wait"] = pool.setup.get("scorer_wait", 0.0) + time.perf_counter() - t1
    return chain, pool


def _load(pool: ModelPool, op, spec) -> None:
    """Load an op's model at a worker's start; a loader that fails is one line naming the op and the
    model (a plug-in's loader raising OSError, say), not the loader's traceback."""
    load_said(pool.get, spec, op.name)


@contextlib.contextmanager
def main_importable():
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
