"""The lock that holds an export for one run, from before its resume state is read to the end of its
finish: a second run is refused ("another djx run is writing") instead of reading a manifest whose
parts the first run is about to move away.

A POSIX record lock on `<state folder>/lock`: forked workers do not inherit it, and it dies with the
process (kill -9 included). A run that finishes removes the state folder, lock file included, while
it holds the lock; a run that opened that file just before then holds a lock on a file no longer
there, so a lock counts only when the file locked is still the one at the lock's path."""
from __future__ import annotations

import fcntl
import os

from djx.core.errors import DjxError
from djx.core.io.private_files import open_own, private_folder

_TRIES = 3  # a lock file removed under us each time: runs finishing one after another


class ExportLock:
    def __init__(self, state_dir: str, export: str):
        self.path, self.export = os.path.join(state_dir, "lock"), export
        self._file = None

    def __enter__(self) -> "ExportLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        """Hold the export (a no-op when this process holds it already); a DjxError when another run does."""
        for _ in range(_TRIES):
            if self._file is not None:
                return
            self._try()
        if self._file is None:
            raise self._busy()

    def _try(self) -> None:
        private_folder(os.path.dirname(self.path))
        try:
            f = os.fdopen(open_own(self.path, os.O_WRONLY | os.O_CREAT), "w")
        except FileNotFoundError:
            return  # its folder was removed just now (a run finishing): try again
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise self._busy() from None
        try:
            st, now = os.fstat(f.fileno()), os.stat(self.path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                self._file, f = f, None
        except FileNotFoundError:
            pass  # the run that held it finished and removed it: take the one made now
        finally:
            if f is not None:
                f.close()

    def _busy(self) -> DjxError:
        return DjxError(f"another djx run is writing {self.export} right now; wait for it or stop it first")

    def release(self) -> None:
        """Let the export go. A state folder that holds nothing but the lock (a run that stopped
        before it wrote anything) is removed first, while the lock is still held."""
        if self._file is None:
            return
        folder = os.path.dirname(self.path)
        try:
            if os.listdir(folder) == ["lock"]:
                os.remove(self.path)
                os.rmdir(folder)
        except OSError:
            pass  # gone already (a finished run removed it), or not empty: kept
        finally:
            self._file.close()  # releases the lock
            self._file = None
