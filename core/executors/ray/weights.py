"""One copy of each model per run in Ray's object store, loaded by a Ray task per model.

The driver used to load each model and put its weights in the object store before it created the
stage actors: torch's import and every load on start-up's path (3-4 s on 2 cores), the actors
started only after. A task per model loads it instead (its worker imports the run's plug-ins, as a
stage actor does, so a plug-in's loader is found), and the actors are created at once with the
references of the tasks' results: they import torch beside the loads and wait for the weights only
when they load their models (models/share/weight_share.py), mapping them zero-copy from their
node's shared memory. A model whose load fails there, or whose loaded form does not pickle, is
loaded by each actor itself, which says the load's error where there is one."""
from __future__ import annotations

import os
import sys


def shared_weights(ray, specs, on_gpu: bool, custom_ops: tuple, base_dir: str) -> dict | None:
    """The references of each model's payload (models/share/ray_store.py), the loads under way;
    None where there is nothing to share (no models, GPU actors: each of those loads its own copy)."""
    if on_gpu or not specs:
        return None
    from djx.core.models.share.split import spec_key
    # no CPU declared: the loads run while the cluster's CPUs are declared by the actors that wait for them
    load = ray.remote(num_cpus=0, max_retries=0)(shared_payload)
    sys_path = [p for p in sys.path if p]
    return {spec_key(spec, "cpu"): load.remote(spec, custom_ops, base_dir, sys_path) for spec in dict.fromkeys(specs)}


def shared_payload(spec, custom_ops: tuple, base_dir: str, sys_path: list) -> dict:
    """A Ray task: `spec`'s model loaded on CPU, as the object store holds it."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"  # before torch's import: one thread, it declares no CPU
    sys.path += [p for p in sys_path if p not in sys.path and os.path.isdir(p)]  # module plug-ins
    from djx.core.models.pool import loader_for
    from djx.core.models.share.ray_store import ray_payload
    from djx.core.op.registry import load_builtin_ops, load_custom_ops, load_entry_point_ops
    load_builtin_ops()
    load_custom_ops(custom_ops, base_dir)
    load_entry_point_ops()
    return ray_payload(loader_for(spec), spec, "cpu")
