"""Ray: the driver puts each model's weights in the object store once per run, and each CPU actor
reads them zero-copy from the node's shared memory."""
from __future__ import annotations

import pickle
import warnings

from djx.core.models.share.split import join, return_freed_memory, spec_key, split


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


def share_for_ray(ray, specs, on_gpu: bool) -> dict | None:
    """Put each model's weights in the object store once (loaded here, in the driver), for CPU
    actors to read zero-copy: the refs of a WeightShare; None where there is nothing to share (no
    models, GPU actors: each of those loads its own copy)."""
    if on_gpu or not specs:
        return None
    from djx.core.models.pool import loader_for
    refs = {}
    for spec in dict.fromkeys(specs):
        try:
            payload = ray_payload(loader_for(spec), spec, "cpu")
        except pickle.PicklingError:  # a loader's result that does not pickle: each actor loads its own
            continue
        refs[spec_key(spec, "cpu")] = ray.put(payload)
        del payload
        return_freed_memory()
    return refs


def from_payload(payload: dict):
    import torch
    with warnings.catch_warnings():  # the arrays are read-only views of shared memory, on purpose
        warnings.simplefilter("ignore", UserWarning)
        tensors = {k: torch.from_numpy(a) for k, a in payload["arrays"].items()}
    for key in payload["bf16"]:
        tensors[key] = tensors[key].view(torch.bfloat16)
    return join(payload["skeleton"], tensors)
