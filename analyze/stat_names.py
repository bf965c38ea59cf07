"""Which stat names an analysis plots, and a bounded count of the others.

The records of an export may carry any stat names (a re-filtered dataset, a hand-made or hostile
one: thousands of them). The analysis plots the stats of the run's ops, those its recipe's and its
summary's ops compute; every other name is counted (the records carrying it), never summarised, and
listed capped. With no op known (a bare export) it plots the names most records carry, capped.
"""
from __future__ import annotations

from collections import Counter

from djx.core.io.terminal_text import safe

PLOT_CAP = 50        # stats plotted when no op names them (the default of analyze's max_plots)
LIST_CAP = 50        # names not plotted, listed in the report
TRACK_CAP = 10_000   # distinct names counted; the rest are counted together
NAME_CHARS = 40      # a stat name in a note or the printed table: longer ones are cut


def shown_name(name) -> str:
    """A stat name as the terminal and the notes show it: control and bidi characters as escapes,
    cut when long (a received export chooses its stat names)."""
    return safe(name, NAME_CHARS)


class StatNames:
    """`run_stats`: the stats of the run's ops, or None when no op is known (then the first
    PLOT_CAP names seen get sketches, and `plotted` picks the PLOT_CAP most frequent)."""

    def __init__(self, run_stats: frozenset[str] | None, plot_cap: int = PLOT_CAP, track_cap: int = TRACK_CAP):
        self.run_stats, self.plot_cap, self.track_cap = run_stats, plot_cap, track_cap
        self.records: Counter = Counter()   # name -> records carrying it (the first track_cap names)
        self.untracked = 0                  # occurrences of names beyond track_cap

    def count(self, stats: dict) -> None:
        if len(self.records) + len(stats) <= self.track_cap:
            self.records.update(stats.keys())
            return
        for name in stats:
            if name in self.records or len(self.records) < self.track_cap:
                self.records[name] += 1
            else:
                self.untracked += 1

    def wants(self, name: str, held: int) -> bool:
        """Whether a name first seen now, with `held` names already summarised, gets a sketch."""
        if self.run_stats is not None:
            return name in self.run_stats
        return held < self.plot_cap

    def plotted(self) -> list[str]:
        """The names to summarise and plot: the run's stats that occur, else the most frequent."""
        if self.run_stats is not None:
            return sorted(n for n in self.run_stats if n in self.records)
        return sorted(n for n, _ in self._by_frequency()[:self.plot_cap])

    def others(self) -> list[tuple[str, int]]:
        """(name, records carrying it) of the names not plotted, most frequent first (all tracked)."""
        plotted = set(self.plotted())
        return [(n, c) for n, c in self._by_frequency() if n not in plotted]

    def _by_frequency(self) -> list[tuple[str, int]]:
        return sorted(self.records.items(), key=lambda nc: (-nc[1], nc[0]))

    def notes(self, listed: int) -> list[str]:
        """What is plotted and what is not, said once in the printout and on the page."""
        others = self.others()
        notes = []
        if self.run_stats is None and others:
            notes.append(f"no recipe or run summary names an op whose stats are known here: the {self.plot_cap} "
                         f"stat names most records carry are plotted, {len(others):,} more are not "
                         f"(give --recipe to plot the run's stats)")
        elif others:
            shown = ", ".join(f"{shown_name(n)} ({c})" for n, c in others[:10])
            notes.append(f"{len(others):,} other stat names in the records are computed by no op of this run: "
                         f"not plotted; the report lists the {min(listed, len(others))} most records carry"
                         + (f", {len(others) - listed:,} more are left out" if len(others) > listed else "")
                         + f": {shown}" + (", ..." if len(others) > 10 else ""))
        if self.untracked:
            notes.append(f"the records carry more than {self.track_cap:,} distinct stat names: only the first "
                         f"{self.track_cap:,} seen are counted ({self.untracked:,} occurrences of later ones are not)")
        return notes
