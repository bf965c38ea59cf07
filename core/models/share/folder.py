"""The run folder under /dev/shm (else the temp folder) where local workers find a model's shared
copy: the first process that needs a model writes its skeleton and tensors there once, and every
process memory-maps the tensors (`torch.load(mmap=True)`), so all read the same page-cache pages.

A run folder is named after its owner (pid and process start time): a run killed with kill -9
leaves it behind, and the next run removes the folders whose owner is gone (`remove_stale`)."""
from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import tempfile

from djx.core.models.share.split import join, return_freed_memory, split, tensor_slots


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


def load_from_folder(folder: str, key: str, loader, spec, device: str):
    """Map the model from the run folder; the first process to need it writes it there."""
    import torch
    own = write_to_folder(folder, key, loader, spec, device)
    if own is not None:  # this process loaded it and keeps it
        return own
    if os.path.exists(os.path.join(folder, f"{key}.own")):
        return loader(spec, device)  # file-backed: every process maps the model's own file
    with open(os.path.join(folder, f"{key}.skeleton"), "rb") as f:
        skel = f.read()
    return join(skel, torch.load(os.path.join(folder, f"{key}.pt"), mmap=True, weights_only=True))


def write_to_folder(folder: str, key: str, loader, spec, device: str):
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
        return_freed_memory()  # the private copy this process loaded is garbage now
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
    for *_, t in tensor_slots(obj):
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
