"""Progress a person can read: a start-up phase ("loading models"), then samples done of the total,
percent, a steady rate and the time left. A tqdm bar on a terminal; plain log lines otherwise (a
pipe, a log file), with the same figures.

The rate counts only this session's samples since its start-up ended (workers ready, models
loaded): start-up does not make it look slow, and samples of earlier sessions of a resumed run do
not make it look fast."""
from __future__ import annotations

import os
import sys
import time

from djx.core.run.estimate import duration


# where djx's lines go instead of sys.stderr while a run sends the process's stderr elsewhere (the
# Ray engine sends it to Ray's log file: see executors/ray/ray_log.py); the last entry counts
TERMINAL: list = []


class Progress:
    def __init__(self, total: int | None = None, done: int = 0, enabled: bool = True, every_s: float | None = None,
                 stream=None, t0: float | None = None):
        self.t0 = time.monotonic() if t0 is None else t0  # when the session began
        self._stream = stream
        self.enabled = enabled
        # seconds between plain lines: DJX_PROGRESS_EVERY_S (0: a line per batch), else 10
        self.every_s = every_s if every_s is not None else float(os.environ.get("DJX_PROGRESS_EVERY_S") or 10.0)
        self.total = total
        self.done = done            # samples done, earlier sessions included
        self.kept = 0               # kept in this session
        self.session = 0            # samples of this session since its start-up ended
        self.since: float | None = None
        self.untimed = 0            # samples that came in at `since` (see processing)
        self.last = 0.0
        self.updated_at: float | None = None  # the last update: rates end there (the summary's do too)
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = None
        self.closed = False

    @property
    def stream(self):
        """The given stream, else sys.stderr as it is now (the Ray engine points it at the terminal
        while the process's own stderr goes to Ray's log)."""
        return self._stream or (TERMINAL[-1] if TERMINAL else sys.stderr)

    def _say(self, line: str) -> None:
        if self.enabled:
            print(f"[djx] {line}", file=self.stream, flush=True)

    def starting(self, models: list[str], workers: int | None) -> None:
        """The start-up phase: workers starting, models loading (the first batch waits for it)."""
        who = f"{workers} worker(s)" if workers else "workers"
        what = f"; loading models: {', '.join(models)}" if models else ""
        of = f" of {self.total:,}" if self.total is not None else ""
        resumed = f"{self.done:,}{of} samples done; " if self.done else ""
        self._say(f"{resumed}starting {who}{what}")

    def processing(self, since: float, untimed: int = 0) -> None:
        """Start-up is over (at `since`): the rate and the time left count from there. `untimed`:
        samples that came in at `since` itself (an engine whose first result marks the start: Ray):
        their time is unknown, so the rate leaves them out."""
        if self.since is not None:
            return
        self.since = since
        self.untimed = untimed
        self._say(f"start-up took {since - self.t0:.1f} s; processing"
                  + (f" {self.total - self.done:,} samples" if self.total is not None else ""))
        if self.enabled and self.tty:
            from tqdm import tqdm
            # smoothing 0: tqdm's rate is this session's samples over the time since start-up
            self.bar = tqdm(total=self.total, initial=self.done, unit="sample", file=self.stream,
                            dynamic_ncols=True, smoothing=0)

    def rate(self) -> float | None:
        """This session's samples per second from the end of start-up to the last result (the
        line said at the run's end gives the summary's rate, not one diluted by the finish)."""
        timed = self.session - self.untimed
        if self.since is None or timed <= 0:
            return None  # no sample measured yet: no rate, rather than one over no time
        end = self.updated_at if self.updated_at is not None else time.monotonic()
        return timed / max(end - self.since, 1e-9)

    def eta(self) -> float | None:
        rate = self.rate()
        if rate is None or self.total is None:
            return None
        return max(self.total - self.done, 0) / rate

    def line(self, eta: bool = True) -> str:
        """'1,234 / 12,400 samples (10.0%), 800 kept this session, 45.2 samples/s, ETA 4 min 8 s'"""
        rate, eta = self.rate(), self.eta() if eta else None
        if self.total:
            head = f"{self.done:,} / {self.total:,} samples ({min(self.done / self.total, 1):.1%})"
        else:
            head = f"{self.done:,} samples"
        return (head + f", {self.kept:,} kept this session"
                + (f", {rate:.1f} samples/s" if rate is not None else "")
                + (f", ETA {duration(eta)}" if eta is not None else ""))

    def update(self, n: int, kept: int) -> None:
        self.updated_at = time.monotonic()
        first = self.session == 0
        self.done += n
        self.kept += kept
        self.session += n
        if not self.enabled:
            return
        if self.bar is not None:
            if first and self.untimed:
                self.bar.initial += n  # tqdm's rate counts from `initial`: untimed samples are not in it
            self.bar.update(n)
            self.bar.set_postfix_str(f"kept this session={self.kept:,}", refresh=False)
            return
        now = time.monotonic()
        if first or now - self.last >= self.every_s:
            self.last = now
            self._say(self.line())

    def close(self) -> None:
        """The last line (or the bar's end); once."""
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.session:
            self._say(self.line(eta=False))
