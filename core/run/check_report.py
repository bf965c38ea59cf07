"""What a check found: each problem with how many samples have it and the first positions, the counts,
and notes of what it could not vouch for. A check cut into pieces absorbs each piece's report."""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_LISTED = 10


@dataclass
class CheckReport:
    """The problems found, each with how many samples have it and the first MAX_LISTED positions (memory
    does not grow with the failing samples)."""
    problems: dict = field(default_factory=dict)   # description -> [first sample positions]
    counts: dict = field(default_factory=dict)
    totals: dict = field(default_factory=dict)     # description -> samples (records) with it
    notes: list = field(default_factory=list)      # what the check could not vouch for, not failures
    readers: int = 1                               # the processes that read the outputs

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, what: str, pos, n: int = 1) -> None:
        self.totals[what] = self.totals.get(what, 0) + n
        _list(self.problems.setdefault(what, []), pos)

    def absorb(self, other: CheckReport) -> None:
        """Take in what a piece of the same check found (core/run/check_parallel.py), as if this
        report had been told it."""
        for what, positions in other.problems.items():
            self.totals[what] = self.totals.get(what, 0) + other.totals.get(what, len(positions))
            listed = self.problems.setdefault(what, [])
            for pos in positions:
                _list(listed, pos)

    def describe(self) -> str:
        return "\n".join([self._verdict()] + [f"note: {n}" for n in self.notes])

    def _verdict(self) -> str:
        if self.ok:
            return f"check passed: {_counts_line(self.counts)}"
        lines = ["check FAILED:"]
        for what, positions in self.problems.items():
            valid, total = [p for p in positions if _valid(p)], self.totals.get(what, len(positions))
            if not valid:  # a problem of the whole output (the counts), or of records without a position
                lines.append(f"  {what}" + (f": {total} record(s)" if total > 1 else ""))
                continue
            shown = ", ".join(str(p) for p in valid[:MAX_LISTED])
            more = f" and {total - len(valid[:MAX_LISTED])} more" if total > len(valid[:MAX_LISTED]) else ""
            lines.append(f"  {what}: {total} sample(s), positions {shown}{more}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "counts": self.counts, "notes": self.notes, "readers": self.readers,
                "problems": {k: {"samples": self.totals.get(k, len(v)), "positions": [p for p in v if _valid(p)]}
                             for k, v in self.problems.items()}}


def _list(listed: list, pos) -> None:
    """Name `pos` among the first MAX_LISTED valid positions of a problem (one entry at least)."""
    if _valid(pos) and sum(map(_valid, listed)) < MAX_LISTED or not listed:
        listed.append(pos)


def _valid(pos) -> bool:
    return isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0


def _counts_line(counts: dict) -> str:
    """`60 input = 40 kept + 10 dropped + 10 rejected`, or what of it is known."""
    parts = " + ".join(f"{counts[k]} {k}" for k in ("kept", "dropped", "rejected") if counts.get(k) is not None)
    return f"{counts['input']} input = {parts}" if counts.get("input") is not None else parts
