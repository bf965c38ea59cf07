"""One copy of each model per run in Ray's object store, loaded by one Ray task.

The driver used to load each model and put its weights in the object store before it created the
stage actors: torch's import and every load on start-up's path (3-4 s on 2 cores), the actors
started only after. One Ray task loads them instead, each model one of its results (its worker
imports the run's plug-ins, as a stage actor does, so a plug-in's loader is found; one task, not
one per model: each process that imports torch costs its CPU-seconds again), and the actors are
created at once with the references of its results: they import torch beside the loads and wait
for the weights only when they load their models (models/share/weight_share.py), mapping them
zero-copy from their node's shared memory. A model whose load fails there, or whose loaded form
does not pickle, is loaded by each actor itself, which says the load's error where there is one."""
from __future__ import annotations

import os
import sys


def shared_weights(ray, specs, on_gpu: bool, custom_ops: tuple, base_dir: str) -> dict | None:
    """The references of each model's payload (models/share/ray_store.py), the loads under way;
    None where there is nothing to share (no models, GPU actors: each of those loads its own copy)."""
    if on_gpu or not specs:
        return None
    from djx.core.models.share.split import spec_key
    specs = list(dict.fromkeys(specs))
    # no CPU declared: the loads run while the cluster's CPUs are declared by the actors that wait for them
    load = ray.remote(num_cpus=0, max_retries=0, num_returns=len(specs))(shared_payloads)
    refs = load.remote(specs, custom_ops, base_dir, [p for p in sys.path if p])
    return dict(zip((spec_key(spec, "cpu") for spec in specs), refs if len(specs) > 1 else [refs]))


def shared_payloads(specs: list, custom_ops: tuple, base_dir: str, sys_path: list):
    """A Ray task: each spec's model loaded on CPU, as the object store holds it (one result each,
    stored as it is yielded: one model at a time in this process's memory)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"  # before torch's import: one thread, it declares no CPU
    from djx.core.models.pool import loader_for
    from djx.core.models.share.ray_store import ray_payload
    from djx.core.models.share.split import return_freed_memory
    from djx.core.op.registry import load_run_ops
    load_run_ops(custom_ops, base_dir, sys_path)
    for spec in specs:
        payload = ray_payload(loader_for(spec), spec, "cpu")
        yield payload
        del payload
        return_freed_memory()
