"""Open a file someone else controls: once, without blocking, and only if the open descriptor is a
regular file no larger than a cap.

Checking a path (`stat`) and then opening it by name lets the folder's owner swap in a FIFO between
the two (open() then waits for a writer forever) or a device (/dev/zero never ends). Here the name
is opened once with O_NONBLOCK (a FIFO opens at once instead of waiting), the descriptor is checked
with fstat, and only then made blocking again for ordinary reads."""
from __future__ import annotations

import fcntl
import os
import stat
from typing import BinaryIO


class FileRefused(OSError):
    """The path is not a regular file, or is larger than the reader's cap; `str()` says which."""

    def __init__(self, message: str, kind: str = ""):
        super().__init__(message)
        self.strerror, self.kind = message, kind  # kind: what the path is when not a regular file

    def __str__(self) -> str:
        return self.strerror


def open_regular(path: str, max_bytes: int | None = None) -> BinaryIO:
    """`open(path, 'rb')` that refuses (FileRefused) anything but a regular file of at most
    `max_bytes`; FileNotFoundError and other OSErrors pass through as open() raises them."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = kind_of(st.st_mode)
            raise FileRefused(f"not a regular file ({path} is {kind})", kind)
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileRefused(f"{path} is {st.st_size} bytes, over the cap of {max_bytes} bytes")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_input(path: str) -> BinaryIO:
    """A dataset file opened once, refused (DjxError, one line) unless it is a regular file: one
    swapped for a FIFO since the dataset was listed would block the run forever."""
    from djx.core.errors import DjxError
    try:
        return open_regular(path)
    except FileRefused as e:
        raise DjxError(f"dataset file {path} is {e.kind} now, not a regular file: djx reads files it can "
                       f"read again on resume") from None


def read_regular(path: str, max_bytes: int) -> bytes:
    """The whole content of a regular file of at most `max_bytes` (read at most one byte past the
    cap, so a file that grows after the check is refused too)."""
    with open_regular(path, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileRefused(f"{path} grew past the cap of {max_bytes} bytes while being read")
    return data


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket or other special file"


class opened_path:
    """`with opened_path(path, max_bytes) as name:` a name for a library that takes only a path
    (fastText, KenLM): the file is opened and checked here, and the library opens the same open
    file through /proc/self/fd, so a swap of the name after the check cannot reach it."""

    def __init__(self, path: str, max_bytes: int | None = None):
        self.path, self.max_bytes, self.file = path, max_bytes, None

    def __enter__(self) -> str:
        self.file = open_regular(self.path, self.max_bytes)
        by_fd = f"/proc/self/fd/{self.file.fileno()}"
        return by_fd if os.path.exists(by_fd) else self.path

    def __exit__(self, *exc) -> None:
        self.file.close()
