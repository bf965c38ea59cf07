"""Which input positions the outputs of a run hold, in memory bounded by what the outputs hold.

The input count comes from a summary (or --input-count), which someone may have edited: memory
must not follow it. Positions below the outputs' record bound (core/io/output_reader.record_bound)
are marked in a byte per position; any above it (only in outputs that cannot be right) in a set,
at most one entry per record read. The positions no output holds are counted, not listed: the first
few are named."""
from __future__ import annotations


class Positions:
    def __init__(self, input_count: int, record_bound: int):
        self.input_count = input_count
        self.seen = bytearray(min(input_count, record_bound))
        self.beyond: set[int] = set()  # marked positions at or above len(self.seen)

    def mark(self, pos: int) -> str | None:
        """Mark `pos`; what is wrong with it, or None."""
        if pos >= self.input_count:
            return "position beyond the input count"
        if pos < len(self.seen):
            if self.seen[pos]:
                return "sample appears more than once across the outputs"
            self.seen[pos] = 1
            return None
        if pos in self.beyond:
            return "sample appears more than once across the outputs"
        self.beyond.add(pos)
        return None

    def missing(self, listed: int) -> tuple[int, list[int]]:
        """(how many positions below the input count no output holds, the first `listed` of them)."""
        count = self.seen.count(0) + (self.input_count - len(self.seen) - len(self.beyond))
        first, start = [], 0
        while len(first) < listed and (p := self.seen.find(0, start)) != -1:
            first.append(p)
            start = p + 1
        p = len(self.seen)
        while len(first) < min(listed, count) and p < self.input_count:
            if p not in self.beyond:
                first.append(p)
            p += 1
        return count, first
