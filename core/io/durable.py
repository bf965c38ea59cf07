"""Files a run's state relies on: JSON written so that a crash leaves the old or the new content,
and the sha256 digests that let a resumed run check its parts are the ones it signed."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os

from djx.core.io.private_files import new_file_beside


def sha256_of(f, length: int | None = None):
    """The running sha256 of an open file from its start: its first `length` bytes (None: all);
    None when the file is shorter than `length`."""
    h, left = hashlib.sha256(), length
    f.seek(0)
    while (left is None or left > 0) and (block := f.read(1 << 20 if left is None else min(left, 1 << 20))):
        h.update(block)
        left = None if left is None else left - len(block)
    return None if left else h


def write_durable(path: str, obj) -> str:
    """Write JSON so that the file holds either the old or the new content after any crash; the
    sha256 of what was written."""
    data = json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    fd, tmp = new_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, say: no empty temporary file left beside `path`
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return hashlib.sha256(data).hexdigest()


def write_failed(state_dir: str, e: OSError) -> str:
    """What a failed write of a run's parts means (a full disk, a quota, an I/O error): the data up
    to the last checkpoint survived in `state_dir`, and how to go on."""
    why = "the disk is full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
    return (f"could not write the outputs in {state_dir} ({why}); every sample up to the last checkpoint "
            f"is saved there and the input is untouched: free space (or fix the cause) and run the same "
            f"command again to resume")
