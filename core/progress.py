"""Progress: a tqdm bar on a terminal, plain log lines every few seconds otherwise."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int | None = None, enabled: bool = True, every_s: float = 10.0,
                 stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.every_s = every_s
        self.t0 = self.last = time.monotonic()
        self.done = self.kept = 0
        self.bar = None
        if enabled and getattr(self.stream, "isatty", lambda: False)():
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="sample", file=self.stream, dynamic_ncols=True)

    def update(self, n: int, kept: int) -> None:
        self.done += n
        self.kept += kept
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(kept=self.kept, refresh=False)
            return
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            rate = self.done / max(now - self.t0, 1e-9)
            print(f"[djx] {self.done} samples, {self.kept} kept, {rate:.1f} samples/s",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
