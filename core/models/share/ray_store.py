"""Ray: each model's weights in the object store once per run (a Ray task loads it:
executors/ray/weights.py), and each CPU actor reads them zero-copy from the node's shared memory."""
from __future__ import annotations

import warnings

from djx.core.models.share.split import join, split


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


def from_payload(payload: dict):
    import torch
    with warnings.catch_warnings():  # the arrays are read-only views of shared memory, on purpose
        warnings.simplefilter("ignore", UserWarning)
        tensors = {k: torch.from_numpy(a) for k, a in payload["arrays"].items()}
    for key in payload["bf16"]:
        tensors[key] = tensors[key].view(torch.bfloat16)
    return join(payload["skeleton"], tensors)
