"""Files in a folder that others may write (a team scratch folder, /tmp): nothing there is trusted
by its name. A run's state folder is used only when this user made it and no one else may enter it
(what the shared-weights root does, core/models/share/folder.py); a file in it is opened without
following a symlink and only when it is a regular file of this user; a temporary file is made
under a fresh random name (O_EXCL), never opened through what someone planted at a fixed one."""
from __future__ import annotations

import os
import re
import secrets
import stat

from djx.core.errors import DjxError
from djx.core.io.folder_trust import check_folder_chain

_NEW = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def private_folder(path: str, what: str = "state folder") -> None:
    """Make `path` (mode 0700), or accept it when it is already this user's own folder that no one
    else may write (then made 0700); a DjxError naming why otherwise."""
    if _own_folder(path, 0o700, what) & 0o077:
        os.chmod(path, 0o700)


def own_folder(path: str, what: str) -> str:
    """Make `path` (mode 0755 at most: readable by others, writable by this user only), or accept
    it when it is already this user's real folder that no one else may write; a DjxError naming
    why otherwise (a link, another user's folder or one others may write could hold planted
    links at the names djx writes). Returns `path`."""
    _own_folder(path, 0o755, what)
    return path


def _own_folder(path: str, mode: int, what: str) -> int:
    """The permission bits of `path`: a folder made now with `mode`, or an existing one that
    passed the check (a DjxError otherwise). The folders above it must be safe too: no one else's,
    none open to others without the sticky bit (io/folder_trust.py)."""
    parent = os.path.dirname(os.path.abspath(path))
    check_folder_chain(parent, f"the {what} {path}")
    if os.path.dirname(path):  # a bare name ("--out a") is a folder in the working directory
        os.makedirs(os.path.dirname(path), exist_ok=True)
        check_folder_chain(parent, f"the {what} {path}")
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    why = ("it is a symlink" if stat.S_ISLNK(st.st_mode) else "it is not a folder" if not stat.S_ISDIR(st.st_mode)
           else f"it belongs to uid {st.st_uid}" if st.st_uid != os.getuid()
           else f"others may write in it (mode {stat.S_IMODE(st.st_mode):04o})" if st.st_mode & 0o022 else "")
    if why:
        raise DjxError(f"the {what} {path} is not a private folder of this user ({why}); another user may have "
                       f"planted it, so djx will not use it: remove it, or write to a folder only you can write")
    return stat.S_IMODE(st.st_mode)


def open_own(path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A file descriptor of `path`, a regular file of this user (no symlink followed; made with
    `mode` when `flags` has O_CREAT); a DjxError otherwise, FileNotFoundError when there is none."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        if e.errno == 40:  # ELOOP: a symlink
            raise DjxError(f"{path} is a symlink, not a file djx wrote: refusing to open it; remove it") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise DjxError(f"{path} is not a file of this user (uid {st.st_uid}, mode {st.st_mode:o}): "
                       f"refusing to use it; remove it")
    return fd


def create_new(path: str, flags: int = os.O_RDWR, mode: int = 0o666) -> int:
    """A new file at `path` (one there already, a symlink included, is removed first, never
    followed); its file descriptor."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.open(path, flags | _NEW, mode)


def remove_leftover_temps(dest: str) -> None:
    """Remove the temporary files of `dest` (new_file_beside's names) that a killed writer left
    behind: this user's regular files only (unlink never follows a link)."""
    folder, name = os.path.split(dest)
    pattern = re.compile(re.escape(f".{name}.") + r"[0-9a-f]{12}\.tmp")
    try:
        entries = [e for e in os.scandir(folder or ".") if pattern.fullmatch(e.name)]
    except OSError:
        return
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                os.unlink(e.path)
        except OSError:
            continue


def new_file_beside(dest: str) -> tuple[int, str]:
    """A new temporary file in `dest`'s folder, under a fresh random name; (fd open for writing,
    path). It becomes `dest` by os.replace, which replaces a planted link rather than following it."""
    folder, name = os.path.split(dest)
    while True:
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | _NEW, 0o666), tmp
        except FileExistsError:
            continue
