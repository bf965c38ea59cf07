"""Ray: each model's weights go into the object store once per run, and each CPU actor reads them
zero-copy from the node's shared memory. A Ray task loads them (not the driver), so the actors
start, and import torch, while the weights load: the driver imported torch and loaded every model
before the first actor could start, seconds of a run's start-up."""
from __future__ import annotations

import pickle
import warnings

from djx.core.models.share.split import join, spec_key, split


def ray_payload(loader, spec, device: str) -> dict:
    """A model as the object store holds it: its skeleton and its tensors as numpy arrays
    (bfloat16, which numpy lacks, as int16 bits)."""
    import torch
    skel, tensors = split(loader(spec, device))
    arrays, bf16 = {}, []
    for key, t in tensors.items():
        if t.dtype == torch.bfloat16:
            t, _ = t.view(torch.int16), bf16.append(key)
        arrays[key] = t.numpy()
    return {"skeleton": skel, "arrays": arrays, "bf16": bf16}


def share_for_ray(ray, specs, on_gpu: bool, plugins: tuple = ()) -> dict | None:
    """Each model's weights put in the object store once, by a Ray task of their own, for CPU actors
    to read zero-copy: the refs of a WeightShare (of the tasks' results: an actor waits for the one
    it needs); None where there is nothing to share (no models, GPU actors: each of those loads its
    own copy). `plugins`: (custom_ops, base_dir, sys_path), for loaders that plug-ins register."""
    if on_gpu or not specs:
        return None
    task = ray.remote(num_cpus=0, max_retries=0)(_payload)  # no CPU of the actors' is taken from them
    return {spec_key(spec, "cpu"): task.remote(spec, plugins) for spec in dict.fromkeys(specs)}


def _payload(spec, plugins: tuple) -> dict | None:
    """(In a Ray worker) the model's payload; None where the loader's result does not pickle (each
    actor then loads its own copy)."""
    import os
    import sys
    custom_ops, base_dir, sys_path = plugins or ((), ".", [])
    sys.path += [p for p in sys_path if p not in sys.path and os.path.isdir(p)]
    from djx.core.models.pool import loader_for
    from djx.core.op.registry import load_builtin_ops, load_custom_ops, load_entry_point_ops
    load_builtin_ops()
    load_custom_ops(custom_ops, base_dir)
    load_entry_point_ops()
    try:
        payload = ray_payload(loader_for(spec), spec, "cpu")
        pickle.dumps(payload["skeleton"])
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return payload


def from_payload(payload: dict):
    import torch
    with warnings.catch_warnings():  # the arrays are read-only views of shared memory, on purpose
        warnings.simplefilter("ignore", UserWarning)
        tensors = {k: torch.from_numpy(a) for k, a in payload["arrays"].items()}
    for key in payload["bf16"]:
        tensors[key] = tensors[key].view(torch.bfloat16)
    return join(payload["skeleton"], tensors)
