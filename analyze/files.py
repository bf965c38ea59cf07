"""The files analyze writes into its folder (`<stem>.analysis/`, beside an export that may have
come from someone else, with whatever they packed in it): none is opened by its name. Each is
written under a fresh random name and renamed into place, which replaces a link planted at the name
instead of writing through it (as core/io/writers.py writes the outputs); `thumbs/` must be a real
folder of this user, made anew when it is not."""
from __future__ import annotations

import contextlib
import os
import shutil
import stat

from djx.core.io.private_files import new_file_beside, remove_leftover_temps


@contextlib.contextmanager
def replacing(path: str, mode: str = "w", **kwargs):
    """A file object to write `path`'s new content to; it becomes `path` when the block ends
    without an error (the temporary file is removed otherwise)."""
    remove_leftover_temps(path)  # a killed analysis's
    fd, tmp = new_file_beside(path)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def own_subfolder(path: str) -> str:
    """`path`, a folder of this user that no one else may write: made, or made anew when what is
    there is not one (a link is removed, never followed; so is a file or another user's folder)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o755)
        return path
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        if st.st_mode & 0o022:
            os.chmod(path, 0o755)
        return path
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    os.mkdir(path, 0o755)
    return path


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def text_cell(text) -> str:
    """A CSV cell of text a dataset controls (a stat or op name): one that a spreadsheet would take
    for a formula (it starts with = + - @, a tab or a carriage return) gets a leading single quote,
    as OWASP advises. Numbers never go through here."""
    text = str(text)
    return "'" + text if text.startswith(_FORMULA) else text
