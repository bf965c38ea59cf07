"""Poison samples on Ray: which batch each stage is on, and where in it.

A stage actor that dies takes its batch with it, and Ray retries the batch on a fresh actor. The
retry learns here that its batch killed an actor: it then runs the batch one sample at a time,
telling this tracker which sample and op it is on, so the next death names the poison sample, which
the retry after it rejects. Each retry either names one more poison sample or counts as a death
that named none ("blind"; two of those end the run). A stage whose watchdog stops it (no progress
for sample_timeout) says so first, so the sample it was on is rejected as a timeout."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Attempt:
    """What a stage learns when it starts a batch."""
    earlier: int                                        # attempts before this one (0: first run)
    poison: dict[int, int] = field(default_factory=dict)  # sample index -> op index that killed
    blind: int = 0                                      # deaths that named no sample
    timeouts: set = field(default_factory=set)          # poison samples that hung rather than crashed


@dataclass
class _Open:
    tries: int = 1
    at: tuple[int, int] | None = None  # (sample index, op index) being run in careful mode
    poison: dict[int, int] = field(default_factory=dict)
    blind: int = 0
    timeouts: set = field(default_factory=set)
    stopped: bool = False  # the last attempt was stopped by its watchdog


class PoisonTracker:
    """One small actor per run, keyed by batch (see the stage's batch key)."""

    def __init__(self):
        self.open: dict = {}

    def begin(self, key) -> Attempt:
        e = self.open.get(key)
        if e is None:
            self.open[key] = _Open()
            return Attempt(0)
        if e.at is not None:  # the last attempt died inside this sample
            sample, op = e.at
            e.poison[sample] = op
            if e.stopped:
                e.timeouts.add(sample)
            e.at = None
        elif e.tries > 1:  # died in careful mode outside any sample
            e.blind += 1
        e.tries += 1
        e.stopped = False
        return Attempt(e.tries - 1, dict(e.poison), e.blind, set(e.timeouts))

    def at(self, key, where: tuple[int, int] | None) -> None:
        if key in self.open:
            self.open[key].at = where

    def stopped(self, key) -> None:
        """The attempt on `key` is being stopped by its watchdog (it made no progress)."""
        if key in self.open:
            self.open[key].stopped = True

    def end(self, key) -> None:
        self.open.pop(key, None)
