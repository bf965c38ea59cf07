"""A loaded model <-> a skeleton (the loaded object with meta tensors in every parameter and buffer
slot, pickled) and its tensors. Tied weights stay tied (one tensor per object, however many slots
hold it) and non-persistent buffers travel too, since every slot of every module is recorded."""
from __future__ import annotations

import hashlib
import pickle


def spec_key(spec, device: str) -> str:
    """The file name / object key of one model on one device."""
    return hashlib.sha1(repr((spec, device)).encode()).hexdigest()[:16]


def _roots(obj) -> list:
    """The torch modules inside a loader's result (a module, a tuple of them, or an object that
    carries one as `.model`, such as LoadedModel)."""
    import torch
    if isinstance(obj, torch.nn.Module):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [m for part in obj for m in _roots(part)]
    inner = getattr(obj, "model", None)
    return [inner] if isinstance(inner, torch.nn.Module) else []


def tensor_slots(obj):
    """Every (root index, module name, kind, name, tensor) slot holding a parameter ("p") or a
    buffer ("b")."""
    for r, root in enumerate(_roots(obj)):
        for mname, module in root.named_modules():
            for kind, table in (("p", module._parameters), ("b", module._buffers)):
                for name, tensor in table.items():
                    if tensor is not None:
                        yield r, mname, kind, name, tensor


def _table(obj, r: int, mname: str, kind: str) -> dict:
    module = _roots(obj)[r].get_submodule(mname)
    return module._parameters if kind == "p" else module._buffers


def split(obj) -> tuple[bytes, dict]:
    """(skeleton, tensors) of a loaded model; `obj` is left holding meta tensors (drop it)."""
    import torch
    tensors, index, slots = {}, {}, []
    for r, mname, kind, name, t in list(tensor_slots(obj)):
        key = index.get(id(t))
        if key is None:
            key = index[id(t)] = f"t{len(tensors)}"
            tensors[key] = t.detach().contiguous()
        slots.append((r, mname, kind, name, key))
    meta = {key: torch.empty_like(t, device="meta") for key, t in tensors.items()}
    _fill(obj, slots, meta)
    try:
        return pickle.dumps((obj, slots), protocol=pickle.HIGHEST_PROTOCOL), tensors
    except Exception as e:  # noqa: BLE001  (a loader's result that does not pickle: give it its tensors back)
        _fill(obj, slots, tensors)
        raise pickle.PicklingError(f"{type(e).__name__}: {e}") from e


def _fill(obj, slots: list, tensors: dict) -> None:
    """Put `tensors` into the slots; slots holding one tensor get one Parameter (tied stay tied)."""
    import torch
    params: dict = {}
    for r, mname, kind, name, key in slots:
        if kind == "p" and key not in params:
            params[key] = torch.nn.Parameter(tensors[key], requires_grad=False)
        _table(obj, r, mname, kind)[name] = params[key] if kind == "p" else tensors[key]


def join(skeleton: bytes, tensors: dict):
    """The model of `skeleton` holding `tensors` (not copied); tied slots share one Parameter."""
    obj, slots = pickle.loads(skeleton)
    _fill(obj, slots, tensors)
    return obj


def return_freed_memory() -> None:
    """Hand the heap's free pages back to the kernel (glibc keeps freed large blocks otherwise,
    and this process would hold a private copy's worth of dead pages)."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def shared_bytes(obj) -> int:
    """Bytes of the distinct tensors a loaded model holds (what one shared copy costs)."""
    seen, total = set(), 0
    for *_, t in tensor_slots(obj):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total
