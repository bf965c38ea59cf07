"""Poison samples on Ray: which samples killed an actor, remembered for the whole run.

A stage actor that dies takes its Ray task with it, and Ray retries the whole task (a block of
several batches) on a fresh actor. Each batch tells this tracker which samples it holds (a sample is
named by its stage and its input file and line offset, which survive retries and re-blocking). A
batch holding a sample of an attempt that never ended is a retry: one actor death. The retry runs
its batch one sample at a time ("careful"), saying which sample and op it is on, so the next death
names the poison sample. A named sample is rejected unrun by every later attempt of any batch, so
each poison sample costs at most two deaths (the batch's first, and the one that names it). A death
in careful mode outside any sample is "blind": two of those, or a sample caught in too many deaths
that named nothing, end the run. A stage whose watchdog stops it (no progress for sample_timeout)
says so first, so the sample it was on is rejected as a timeout."""
from __future__ import annotations

from dataclasses import dataclass, field

UNEXPLAINED = 4  # deaths naming no sample that one sample may be caught in before the run ends


@dataclass
class Poison:
    """A sample that killed its actor: the op (index in its stage) it was in, and how."""
    op: int
    timeout: bool = False  # hung (stopped by the watchdog) rather than crashed


@dataclass
class Attempt:
    """What a stage learns when it starts a batch."""
    earlier: int                                           # deaths of attempts on these samples
    careful: bool = False                                  # one sample at a time, saying where
    poison: dict = field(default_factory=dict)             # sample id -> Poison, rejected unrun
    stop: str | None = None                                # why the run must end instead


@dataclass
class _Open:
    """An attempt that has not ended: its samples, and where a careful attempt is."""
    samples: frozenset
    tries: int = 1
    careful: bool = False
    at: tuple | None = None   # (sample id, op index) being run in careful mode
    blind: int = 0
    stopped: bool = False     # the attempt was stopped by its watchdog
    dead: bool = False        # a later attempt has counted its death


class PoisonTracker:
    """One small actor per run. Sample ids are (stage, file, offset) or (stage, file, row hash)."""

    def __init__(self):
        self.open: dict = {}      # sample id -> its open attempt
        self.poison: dict = {}    # sample id -> Poison, for the whole run
        self.unexplained: dict = {}  # sample id -> deaths it was caught in that named no sample
        self.deaths = 0

    def begin(self, samples: list) -> Attempt:
        earlier = list({id(e): e for s in samples if (e := self.open.get(s)) is not None}.values())
        fresh = _Open(frozenset(samples))
        for e in earlier:
            if not e.dead:
                self._died(e)
            fresh.tries = max(fresh.tries, e.tries + 1)
            fresh.blind = max(fresh.blind, e.blind)
        fresh.careful = bool(earlier)
        for s in samples:
            self.open[s] = fresh
        known = {s: self.poison[s] for s in samples if s in self.poison}
        stop = None
        if fresh.blind >= 2 or any(self.unexplained.get(s, 0) >= UNEXPLAINED for s in samples):
            stop = ("its actors keep dying on one batch outside any sample (out of memory?); lower "
                    "batch_size or give the actors more memory")
        return Attempt(fresh.tries - 1, fresh.careful, known, stop)

    def _died(self, e: _Open) -> None:
        """The attempt `e` died: count it, and learn what it was on."""
        e.dead = True
        self.deaths += 1
        if e.at is not None:
            sample, op = e.at
            self.poison[sample] = Poison(op, e.stopped)
            return
        if e.careful:
            e.blind += 1
        for s in e.samples:
            self.unexplained[s] = self.unexplained.get(s, 0) + 1

    def at(self, sample, where: tuple | None) -> None:
        """The careful attempt holding `sample` is now in (sample id, op index), or between samples."""
        if sample in self.open:
            self.open[sample].at = where

    def stopped(self, sample) -> None:
        """The attempt holding `sample` is being stopped by its watchdog (it made no progress)."""
        if sample in self.open:
            self.open[sample].stopped = True

    def end(self, samples: list) -> None:
        for s in samples:
            self.open.pop(s, None)

    def death_count(self) -> int:
        """Actor deaths during a batch so far (each one counted by the attempt that followed it)."""
        return self.deaths
