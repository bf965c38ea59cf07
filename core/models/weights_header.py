"""A model folder's parameter count read from its safetensors headers, without torch or transformers.

The planner sizes GPU work by each model's bytes. Building the model on the meta device to count
its parameters imports torch and transformers in the main process: 3 s here and 11.7 s of the
main process's start-up on an H100 box (CUDA's torch), before any worker could start. A
safetensors file begins with an 8-byte little-endian length and a JSON header naming every
tensor's dtype and shape: reading the headers counts the parameters in milliseconds.
"""
from __future__ import annotations

import json
import math
import os
import struct

from djx.core.io.regular_file import open_regular

MAX_HEADER_BYTES = 64 << 20  # a header larger than this is not a model's (the format's own cap is 100 MB)


def stored_parameter_count(folder: str) -> int | None:
    """The number of values the folder's safetensors files hold (`model.safetensors`, or the
    shards its index names); None where it has none or one cannot be read as safetensors."""
    if not isinstance(folder, str) or not os.path.isdir(folder):
        return None
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.lexists(index):
        try:
            with open_regular(index, MAX_HEADER_BYTES) as f:
                shards = sorted(set(json.loads(f.read(MAX_HEADER_BYTES)).get("weight_map", {}).values()))
        except (OSError, ValueError, AttributeError):
            return None
    else:
        shards = ["model.safetensors"]
    total = 0
    for name in shards:
        if not isinstance(name, str) or os.path.basename(name) != name:
            return None  # an index naming files outside the folder
        n = _count(os.path.join(folder, name))
        if n is None:
            return None
        total += n
    return total or None


def _count(path: str) -> int | None:
    try:
        with open_regular(path) as f:  # a FIFO or a device is refused, never waited on
            head = f.read(8)
            if len(head) != 8:
                return None
            (size,) = struct.unpack("<Q", head)
            if size > MAX_HEADER_BYTES:
                return None
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    n = 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            return None
        n += math.prod(shape)
    return n
