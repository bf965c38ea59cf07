"""A request to stop, the command line's answer to SIGTERM (a scheduler ending the job, `kill`).

The signal handler only sets the request; the loops that do the work check it between batches
(the run) or between records and pictures (analyze) and leave by raising Stopped, so the run's
progress is saved exactly as a failure between batches saves it. No code inside an op, a library
or a `finally` can swallow it: nothing is raised there. A second SIGTERM (or a Ctrl-C after one)
ends the process at once, as a kill does; the run resumes from its last checkpoint then.

The command line makes one Stop and passes it down (Pipeline.run(stop=...), the executors,
analyze); a library user who passes none gets the behaviour of before.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

# what a run stopped between batches has saved (the checkpoint its ledger takes on the way out)
RUN_SAVED = "the work done so far is saved: run the same command again to resume"
# what a stop before the first batch leaves: nothing (reading the recipe, its files, the plan)
NOTHING_STARTED = "nothing was processed or written yet: run the same command again to start"

class Stopped(Exception):
    """The work stopped between two steps because a stop was requested; `then` says what is saved."""

    def __init__(self, signal_name: str, then: str):
        super().__init__(f"terminated ({signal_name}); {then}")
        self.signal_name, self.then = signal_name, then


class StoppedNow(KeyboardInterrupt):
    """A stop in a phase that writes nothing (Stop.at_once): raised by the handler itself, so a
    read that blocks (a FIFO, a slow disk, a plug-in's import) ends at once. A KeyboardInterrupt,
    as Ctrl-C is, so no `except Exception` in a library keeps it."""

    def __init__(self, signal_name: str, then: str):
        super().__init__(f"terminated ({signal_name}); {then}")


class Stop:
    """Set by the signal handlers install() puts in place; read by check() and, to wake a loop
    blocked on pipes and processes at once, through fileno() in its wait list."""

    def __init__(self):
        self.signal_name: str | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous: dict | None = None
        self._at_once: str | None = None  # inside at_once(): what a stop leaves

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def request(self, signal_name: str = "SIGTERM") -> None:
        if self.signal_name is None:
            self.signal_name = signal_name
            try:
                os.write(self._write, b"x")
            except OSError:  # the pipe is full: it is readable already
                pass

    def check(self, then: str) -> None:
        """Raise Stopped (saying `then`: what is saved, what to do) once a stop is requested."""
        if self.signal_name is not None:
            raise Stopped(self.signal_name, then)

    @contextmanager
    def at_once(self, then: str = NOTHING_STARTED):
        """Inside the block (a phase that writes nothing: loading the recipe, reading its files,
        planning) a SIGTERM raises StoppedNow from the handler, so a blocking read cannot hold it;
        one requested before the block raises at its start."""
        if self.signal_name is not None:
            raise StoppedNow(self.signal_name, then)
        self._at_once = then
        try:
            yield
        finally:
            self._at_once = None

    def fileno(self) -> int:
        """Readable once a stop is requested."""
        return self._read

    # -- the handlers ----------------------------------------------------------------------
    def install(self) -> None:
        """Handle SIGTERM (and a Ctrl-C that follows one) in this, the main, thread; again after a
        library (Ray's init) put its own handler in place. The first call keeps the handlers to
        restore."""
        if threading.current_thread() is not threading.main_thread():
            return
        before = {signal.SIGTERM: signal.signal(signal.SIGTERM, self._on_term)}
        if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, self._on_int):  # not an ignored one
            before[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_int)
        if self._previous is None:
            self._previous = before

    def uninstall(self) -> None:
        for signum, handler in (self._previous or {}).items():
            signal.signal(signum, handler)
        self._previous = None
        os.close(self._read)
        os.close(self._write)

    def _on_term(self, signum, frame) -> None:
        if self.requested:
            self._now(signum)
        self.request("SIGTERM")
        if self._at_once is not None:
            raise StoppedNow("SIGTERM", self._at_once)

    def _on_int(self, signum, frame) -> None:
        if self.requested:
            self._now(signum)
        raise KeyboardInterrupt  # Ctrl-C alone: as Python's own handler does

    @staticmethod
    def _now(signum: int) -> None:
        """A second signal while stopping: end now, as a kill would (the last checkpoint stands)."""
        os.write(2, f"djx: {signal.Signals(signum).name} again while stopping: stopped at once (a run "
                    f"resumes from its last checkpoint: run the same command again)\n".encode())
        os._exit(128 + signum)


@contextmanager
def ctrl_c_after():
    """Hold a Ctrl-C that comes inside the block until the block is done, then act on it as the
    handler in place would (the run's ledger writes and records each batch whole or not at all).
    Only in the main thread, and only where Ctrl-C has a Python handler (not where it is ignored)."""
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(handler):
        yield
        return
    held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if held:
            handler(signal.SIGINT, held[0])
