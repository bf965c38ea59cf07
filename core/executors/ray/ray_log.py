"""Ray's own output kept off the terminal. While a Ray run lasts, this process's stderr (file
descriptor 2: the C++ core worker's `core_worker.cc` lines, Ray's Python loggers, which write to
sys.stderr when they log, the workers' and raylet's lines Ray forwards to the driver) and its
stdout (the workers' prints Ray forwards) go to a log file next to the export; djx's progress
goes to the terminal the process had. The run's errors name the file."""
from __future__ import annotations

import os
import re
import sys
from typing import Iterator

from djx.core.errors import DjxError
from djx.core.io.private_files import open_own
from djx.core.records import FailFast

from djx.core.run import progress

# a line Ray wrote about an error: glog's `E`/`F` severity (core_worker.cc), Python's ERROR, a traceback
ERROR_LINE = re.compile(r"^\[?[^\]]*\]? ?[EF]\d{4} |\b(ERROR|CRITICAL|FATAL)\b|^Traceback|\bE \d{4}|\] [EF] ")


def log_path(export_path: str) -> str:
    """`<folder>/<stem>.ray.log` next to the export `<folder>/<stem>.<fmt>`."""
    from djx.core.io.outputs import OutputPaths
    paths = OutputPaths.for_export(export_path)
    return paths.summary[:-len(".summary.json")] + ".ray.log"


class RayLog:
    """Use as a context manager around everything a run does with Ray."""

    def __init__(self, path: str):
        self.path = path
        self._saved = self._file = self._stdout = None

    def __enter__(self) -> "RayLog":
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        # the export folder may be writable by others: never append through a link planted at this name
        fd = open_own(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self._file = os.fdopen(fd, "a", buffering=1, encoding="utf-8", errors="backslashreplace")
        self._start = self._file.tell()
        self._saved = os.dup(2)
        # djx's lines: the terminal (a stream on a copy of the old stderr; left open, a bar may hold it)
        progress.TERMINAL.append(open(self._saved, "w", buffering=1, encoding="utf-8",
                                      errors="backslashreplace", closefd=False))
        os.dup2(self._file.fileno(), 2)
        self._stdout, sys.stdout = sys.stdout, self._file
        return self

    def __exit__(self, *exc) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout = self._stdout
        os.dup2(self._saved, 2)
        progress.TERMINAL.pop()
        self._file.close()

    def errors(self) -> bool:
        """Whether Ray logged an error line during this run."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self._start)
                return any(ERROR_LINE.search(line) for line in f)
        except OSError:
            return False

    def pointer(self) -> str:
        return f"Ray's own log of this run: {self.path}"


def logged(results: Iterator, path: str) -> Iterator:
    """The items of `results` (a Ray run) with Ray's output in the log at `path`. An error of the
    run names the log when Ray logged an error or the error is Ray's. (A run that succeeds says
    nothing of the log: Ray logs some lines at error level in every run, e.g. core_worker.cc on
    actors whose constructor arguments are in the object store.)"""
    log = RayLog(path)
    try:
        with log:
            yield from results
    except FailFast:
        raise  # a bad sample under on_error: fail: djx's own message says everything
    except DjxError as e:
        if e.args and isinstance(e.args[0], str) and (log.errors() or "ray" in e.args[0].lower()):
            e.args = (f"{e.args[0]}\n[djx] {log.pointer()}", *e.args[1:])
        raise
