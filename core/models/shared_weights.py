"""One copy of a model's weights per machine, mapped read-only by every worker on it.

The first process that needs a model loads it with its loader, then splits the result into a
*skeleton* (the loaded object, every parameter and buffer replaced by a meta tensor, pickled) and
its *tensors*. Every process, the first included, rebuilds the model from the skeleton and
tensors it did not copy:

- local workers: the tensors are saved once in a run folder under /dev/shm and memory-mapped
  (`torch.load(mmap=True)`), so all workers read the same page-cache pages;
- GPU workers: a weight owner process per device serves CUDA IPC handles of its one copy
  (weight_owner.py);
- Ray actors: the driver puts the tensors as numpy arrays in the object store once per run, and
  each actor reads them zero-copy from the node's shared memory.

Tied weights stay tied (one tensor per object, however many slots hold it) and non-persistent
buffers (absent from a state dict) travel too, since every slot of every module is recorded.

A run folder is named after its owner (pid and process start time): a run killed with kill -9
leaves it behind, and the next run removes the folders whose owner is gone (`remove_stale`).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field

SHM = "/dev/shm"


def share_root() -> str:
    """Where run folders live: tmpfs (/dev/shm) where there is one, else the temp folder."""
    base = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"djx-weights-{os.getuid()}")


def _start_ticks(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), None when there is no such process:
    with the pid it names a process uniquely, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else fields[19].decode()  # a zombie is gone too
    except (OSError, IndexError):
        try:
            import psutil
            return str(int(psutil.Process(pid).create_time() * 100))
        except Exception:  # noqa: BLE001  (gone, or not allowed to look: treat as gone)
            return None


def create_run_folder() -> str:
    """A new, empty folder for this run's weights (stale folders of dead runs removed first)."""
    remove_stale()
    root = share_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    pid = os.getpid()
    return tempfile.mkdtemp(prefix=f"run-{pid}-{_start_ticks(pid)}-", dir=root)


def remove_run_folder(folder: str | None) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale() -> list[str]:
    """Remove the run folders whose owner process is gone; return their paths."""
    root = share_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    gone = []
    for name in names:
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != "run" or not parts[1].isdigit():
            continue
        if _start_ticks(int(parts[1])) != parts[2]:
            gone.append(os.path.join(root, name))
            shutil.rmtree(gone[-1], ignore_errors=True)
    return gone


# -- a loaded model <-> skeleton + tensors -------------------------------------------------------

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


def _slots(obj):
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
    for r, mname, kind, name, t in list(_slots(obj)):
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


def _spec_key(spec, device: str) -> str:
    return hashlib.sha1(repr((spec, device)).encode()).hexdigest()[:16]


# -- where the tensors live --------------------------------------------------------------------

@dataclass(frozen=True)
class WeightShare:
    """How a worker finds the shared weights of this run: a local run folder, or (Ray) object
    refs of each model's payload. Passed to workers by value."""
    folder: str = ""
    refs: dict = field(default_factory=dict)  # _spec_key(spec, device) -> ObjectRef of ray_payload()
    owners: dict = field(default_factory=dict)  # device -> weight_owner.OwnerAddress (GPUs)

    def covers(self, device: str) -> bool:
        """Whether a worker on `device` maps its weights from here (GPUs: only through an owner)."""
        return device in self.owners or (not device.startswith("cuda") and bool(self.folder or self.refs))

    def load(self, loader, spec, device: str):
        """`loader(spec, device)`'s model, its weights mapped from the shared copy."""
        if device in self.owners:
            from djx.core.models.gpu_owner import load_from_owner
            return load_from_owner(self.owners[device], loader, spec, device)
        key = _spec_key(spec, device)
        if key in self.refs:
            import ray
            return from_payload(ray.get(self.refs[key]))
        if self.folder:
            return _load_from_folder(self.folder, key, loader, spec, device)
        return loader(spec, device)


def _load_from_folder(folder: str, key: str, loader, spec, device: str):
    """Map the model from the run folder; the first process to need it writes it there."""
    import torch
    own = _write_to_folder(folder, key, loader, spec, device)
    if own is not None:  # this process loaded it and keeps it
        return own
    if os.path.exists(os.path.join(folder, f"{key}.own")):
        return loader(spec, device)  # file-backed: every process maps the model's own file
    with open(os.path.join(folder, f"{key}.skeleton"), "rb") as f:
        skel = f.read()
    return join(skel, torch.load(os.path.join(folder, f"{key}.pt"), mmap=True, weights_only=True))


def _write_to_folder(folder: str, key: str, loader, spec, device: str):
    """Write the model's skeleton and tensors to the run folder unless they are there (one writer,
    the others wait for the finished files). Returns the model this process loaded when it keeps
    it: one that does not pickle, or one whose weights are views of its memory-mapped file (a
    `<key>.own` marker then tells the other processes to load it themselves); None otherwise."""
    import torch
    weights, skeleton = os.path.join(folder, f"{key}.pt"), os.path.join(folder, f"{key}.skeleton")
    own = os.path.join(folder, f"{key}.own")
    with open(os.path.join(folder, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(skeleton) or os.path.exists(own):
            return None
        obj = loader(spec, device)
        if file_backed_fraction(obj) >= FILE_BACKED:
            open(own, "w").close()
            return obj
        try:
            skel, tensors = split(obj)
        except pickle.PicklingError:
            return obj
        del obj
        torch.save(tensors, weights + ".tmp")
        with open(skeleton + ".tmp", "wb") as f:
            f.write(skel)
        del tensors
        os.replace(weights + ".tmp", weights)
        os.replace(skeleton + ".tmp", skeleton)  # last: its presence means both are whole
        _return_freed_memory()  # the private copy this process loaded is garbage now
    return None


# A model whose weights are (almost all) views of the file its loader memory-mapped needs no copy:
# a safetensors file loaded in its own dtype stays in the page cache, which the kernel shares
# between every process that maps it (transformers does this, 4.57 and 5.x measured). A copy under
# /dev/shm would only add its size in RAM that cannot be reclaimed.
FILE_BACKED = 0.95


def file_backed_fraction(obj) -> float:
    """The share of a loaded model's tensor bytes that lie in file mappings of this process
    (/proc/self/maps; 0.0 where there is none to read)."""
    import bisect
    ranges: list[list[int]] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/") or parts[5].rstrip().endswith("(deleted)"):
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if ranges and ranges[-1][1] == lo:
                    ranges[-1][1] = hi  # one file mapped in adjacent pieces
                else:
                    ranges.append([lo, hi])
    except OSError:
        return 0.0
    ranges.sort()
    starts = [lo for lo, _ in ranges]
    total = backed = 0
    seen = set()
    for *_, t in _slots(obj):
        if id(t) in seen:
            continue
        seen.add(id(t))
        n = t.numel() * t.element_size()
        total += n
        ptr = t.data_ptr()
        i = bisect.bisect_right(starts, ptr) - 1
        if i >= 0 and ptr + n <= ranges[i][1]:
            backed += n
    return backed / total if total else 0.0


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the kernel (glibc keeps freed large blocks otherwise,
    and this process would hold a private copy's worth of dead pages)."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


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


def share_for_ray(ray, specs, on_gpu: bool) -> WeightShare | None:
    """Put each model's weights in the object store once (loaded here, in the driver), for CPU
    actors to read zero-copy; None where there is nothing to share (no models, GPU actors: each
    of those loads its own copy)."""
    if on_gpu or not specs:
        return None
    from djx.core.models.pool import loader_for
    refs = {}
    for spec in dict.fromkeys(specs):
        try:
            payload = ray_payload(loader_for(spec), spec, "cpu")
        except pickle.PicklingError:  # a loader's result that does not pickle: each actor loads its own
            continue
        refs[_spec_key(spec, "cpu")] = ray.put(payload)
        del payload
        _return_freed_memory()
    return WeightShare(refs=refs)


def from_payload(payload: dict):
    import torch
    with warnings.catch_warnings():  # the arrays are read-only views of shared memory, on purpose
        warnings.simplefilter("ignore", UserWarning)
        tensors = {k: torch.from_numpy(a) for k, a in payload["arrays"].items()}
    for key in payload["bf16"]:
        tensors[key] = tensors[key].view(torch.bfloat16)
    return join(payload["skeleton"], tensors)


def shared_bytes(obj) -> int:
    """Bytes of the distinct tensors a loaded model holds (what one shared copy costs)."""
    seen, total = set(), 0
    for *_, t in _slots(obj):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total
