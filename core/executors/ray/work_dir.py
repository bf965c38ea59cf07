"""The empty private folder a local Ray is started from, and the sweep of those that drivers
killed before their end (SIGKILL, a lost machine) left behind."""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager

import psutil

PREFIX = "djx-ray-cwd-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-[A-Za-z0-9_]+")


@contextmanager
def empty_working_dir():
    """ray.init puts the driver's working directory on every worker's sys.path, ahead of the
    installed packages: a folder named `djx` there (an export folder, say) then shadows djx in
    every stage actor ("cannot import name 'Batch' from 'djx' (unknown location)"). Ray is started
    from an empty private folder instead, whatever the user's folder holds. Yields the folder (None
    where there is none): it stays while the cluster runs (a local cluster's processes keep it as
    their working directory) and goes with Ours.shut_down, or now if Ray did not start. Its name
    carries this process's id, so a later run removes it if this process is killed first."""
    try:
        here = os.getcwd()
    except OSError:  # the working directory was removed: nothing there to shadow anything
        yield None
        return
    sweep_left(tempfile.gettempdir())
    empty = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    os.chdir(empty)
    try:
        yield empty
    except BaseException:
        shutil.rmtree(empty, ignore_errors=True)
        raise
    finally:
        os.chdir(here)


def sweep_left(parent: str) -> list[str]:
    """Remove, from `parent`, the folders of empty_working_dir whose driver is gone: named with the
    id of no live process, a folder of this user's (not a link, not another's), and empty (rmdir
    removes nothing else). The paths removed."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _NAME.fullmatch(name)
        if match is None or psutil.pid_exists(int(match.group(1))):
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            os.rmdir(path)
        except OSError:  # not empty, gone meanwhile, not ours to remove
            continue
        removed.append(path)
    return removed
