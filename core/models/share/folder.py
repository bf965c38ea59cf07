"""The run folder under /dev/shm (else the temp folder) where local workers find a model's shared
copy: the first process that needs a model writes its skeleton and tensors there once, and every
process memory-maps the tensors (`torch.load(mmap=True)`), so all read the same page-cache pages.

A run folder is named after its owner (pid and process start time): a run killed with kill -9
leaves it behind, and the next run removes the folders whose owner is gone (`remove_stale`).

/dev/shm is writable by every local user, so nothing there is trusted by its name: the root
`djx-weights-<uid>` is used only when this user made it and only this user can enter it (owner,
mode 0700, not a symlink, checked with lstat); otherwise the run folder is a fresh private folder
beside it. The skeleton is a pickle (a loader may return any object), so it is signed with the
run's key (held in memory, passed to workers by value) and checked before it is unpickled: a
skeleton this run did not write is refused, never loaded."""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import pickle
import shutil
import stat
import tempfile

from djx.core.errors import DjxError
from djx.core.models.share.split import join, return_freed_memory, split, tensor_slots


SHM = "/dev/shm"


def share_base() -> str:
    """Where run folders live: tmpfs (/dev/shm) where there is one, else the temp folder."""
    return SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else tempfile.gettempdir()


def share_root(base: str | None = None) -> str:
    """The usual parent of this user's run folders (used only when `private(root)`)."""
    return os.path.join(base or share_base(), f"djx-weights-{os.getuid()}")


def private(path: str) -> bool:
    """Whether `path` is a real folder (not a symlink) of this user that no one else may enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


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


def create_run_folder(base: str | None = None) -> str:
    """A new, empty, private folder for this run's weights (stale folders of dead runs removed
    first): inside this user's root when the root is this user's and private, else beside it."""
    base = base or share_base()
    remove_stale(base)
    root = share_root(base)
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    pid = os.getpid()
    prefix = f"run-{pid}-{_start_ticks(pid)}-"
    if private(root):
        return tempfile.mkdtemp(prefix=prefix, dir=root)  # mkdtemp: 0700, never an existing name
    return tempfile.mkdtemp(prefix=f"djx-weights-{os.getuid()}-{prefix}", dir=base)


def remove_run_folder(folder: str | None) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale(base: str | None = None) -> list[str]:
    """Remove this user's run folders whose owner process is gone; return their paths."""
    base = base or share_base()
    root, beside = share_root(base), f"djx-weights-{os.getuid()}-"
    places = [(root, "")] if private(root) else []
    places.append((base, beside))
    gone = []
    for where, prefix in places:
        try:
            names = [n[len(prefix):] for n in os.listdir(where) if n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            parts, path = name.split("-"), os.path.join(where, prefix + name)
            if len(parts) < 4 or parts[0] != "run" or not parts[1].isdigit() or not private(path):
                continue
            if _start_ticks(int(parts[1])) != parts[2]:
                gone.append(path)
                shutil.rmtree(path, ignore_errors=True)
    return gone


def _signed(secret: bytes, skeleton: bytes) -> bytes:
    return hmac.new(secret, skeleton, hashlib.sha256).digest() + skeleton


def _verified(secret: bytes, data: bytes, path: str) -> bytes:
    """The skeleton in `data` if this run signed it; a DjxError otherwise (never unpickled)."""
    mac, skeleton = data[:32], data[32:]
    if not secret or not hmac.compare_digest(mac, hmac.new(secret, skeleton, hashlib.sha256).digest()):
        raise DjxError(f"{path} was not written by this run: refusing to load it (another user may have "
                       f"planted it; check who can write to {os.path.dirname(os.path.dirname(path))})")
    return skeleton


def _read_private(folder: str, name: str) -> bytes:
    """A file of the run folder, refused unless the folder is this user's and private and the
    file is a regular file of this user (no symlink followed)."""
    path = os.path.join(folder, name)
    if not private(folder):
        raise DjxError(f"the shared-weights folder {folder} is not a private folder of this user: refusing "
                       "to load models from it")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise DjxError(f"{path} is not a file this user wrote: refusing to load it")
        return f.read()


def load_from_folder(folder: str, key: str, loader, spec, device: str, secret: bytes):
    """Map the model from the run folder; the first process to need it writes it there."""
    import torch
    own = write_to_folder(folder, key, loader, spec, device, secret)
    if own is not None:  # this process loaded it and keeps it
        return own
    if os.path.exists(os.path.join(folder, f"{key}.own")):
        return loader(spec, device)  # file-backed: every process maps the model's own file
    path = os.path.join(folder, f"{key}.skeleton")
    skel = _verified(secret, _read_private(folder, f"{key}.skeleton"), path)
    return join(skel, torch.load(os.path.join(folder, f"{key}.pt"), mmap=True, weights_only=True))


def write_to_folder(folder: str, key: str, loader, spec, device: str, secret: bytes):
    """Write the model's skeleton and tensors to the run folder unless they are there (one writer,
    the others wait for the finished files). Returns the model this process loaded when it keeps
    it: one that does not pickle, or one whose weights are views of its memory-mapped file (a
    `<key>.own` marker then tells the other processes to load it themselves); None otherwise."""
    import torch
    if not private(folder):
        raise DjxError(f"the shared-weights folder {folder} is not a private folder of this user: refusing "
                       "to write models to it")
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
            f.write(_signed(secret, skel))
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
