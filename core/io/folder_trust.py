"""A folder djx writes into must be one that no other user can change under it. Where others may
write, they can rename what djx made there and put a link in its place mid-run (the state folder
swapped for a link to the user's own files, which the run's clean-up then removes, or to parts
they wrote, which the run then exports); a link another user planted as one of the path's folders
sends the outputs where they chose. So, as OpenSSH's StrictModes does, every folder from / down to
the one written into must belong to this user or root, and no one else may write in it unless it
has the sticky bit (as /tmp: others may add their own entries there, never rename or remove this
user's). A folder of the user's own group (the group named after the user, no one else in it) may
be group-writable, as umask 002 makes them. A link on the way must be this user's or root's, and
the folders it leads through are checked the same way."""
from __future__ import annotations

import grp
import os
import pwd
import stat

from djx.core.errors import DjxError

_MAX_LINKS = 40  # as the kernel's limit on links followed in one path (ELOOP)
_FIX = ("write to a folder only you can write, or, for a shared scratch area, a sticky folder of root's such "
        "as /tmp")


def check_folder_chain(path: str, where: str) -> None:
    """Refuse, in one line that starts with `where`, a folder `path` that another user could change
    under djx: any folder on the way from / to it that is another user's or open to others without
    the sticky bit, or a link on the way that another user owns. The part of `path` that does not
    exist yet is not looked at (djx makes it: check again once it is made)."""
    todo = [p for p in os.path.abspath(path).split(os.sep) if p]
    real, links = os.sep, 0
    _check_folder(real, os.lstat(real), where)
    while todo:
        name = todo.pop(0)
        if name in (".", ".."):
            real = real if name == "." else os.path.dirname(real)  # `real` has no link left in it
            continue
        step = os.path.join(real, name)
        try:
            st = os.lstat(step)
        except OSError:
            return  # not there (yet), or not searchable: making or writing it says what is wrong
        if stat.S_ISLNK(st.st_mode):
            links += 1
            target = os.readlink(step)
            if st.st_uid not in (os.getuid(), 0):
                raise DjxError(f"{where}: {step} is a link (to {target}) that {_owner(st.st_uid)} made, not you: "
                               f"djx will not follow it (they chose where it leads); give the real folder's "
                               f"path, or remove the link")
            if links > _MAX_LINKS:
                raise DjxError(f"{where}: too many links on the way to {path}")
            real = os.sep if os.path.isabs(target) else real
            todo[:0] = [p for p in target.split(os.sep) if p]
            continue
        if not stat.S_ISDIR(st.st_mode):
            return  # a file where a folder should be: making the folder says so
        _check_folder(step, st, where)
        real = step


def _check_folder(folder: str, st: os.stat_result, where: str) -> None:
    mode = stat.S_IMODE(st.st_mode)
    shown = f"owner {_owner(st.st_uid)}, mode {mode:04o}"
    if st.st_uid not in (os.getuid(), 0):
        raise DjxError(f"{where}: the folder {folder} ({shown}) is another user's: they could rename or replace "
                       f"what djx makes in it while it runs, so djx will not write under it; {_FIX}")
    if mode & stat.S_ISVTX or not mode & 0o022 or (not mode & 0o002 and _own_group(st.st_gid)):
        return
    raise DjxError(f"{where}: others may write in the folder {folder} ({shown}, no sticky bit): they could rename "
                   f"or replace what djx makes under it while it runs, so djx will not write there; "
                   f"`chmod go-w {folder}` (or `chmod +t`), or {_FIX}")


def _own_group(gid: int) -> bool:
    """Whether `gid` is this user's own group: their primary group, named after them, no one else in it."""
    try:
        name = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return gid == os.getgid() and group.gr_name == name and set(group.gr_mem) <= {name}


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
