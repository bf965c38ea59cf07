"""Which input positions the outputs of a run hold, in memory bounded by what the outputs hold.

The input count comes from a summary (or --input-count), which someone may have edited: memory
must not follow it. Positions below the outputs' record bound (core/io/output_reader.record_bound)
are marked in a bit per position; any above it (only in outputs that cannot be right) in a set,
at most one entry per record read. The positions no output holds are counted, not listed: the first
few are named. A check cut into pieces (core/run/check_parallel.py) marks each piece's positions
apart and merges them, and the merge finds a position two pieces both hold."""
from __future__ import annotations

TWICE = "sample appears more than once across the outputs"


class Positions:
    def __init__(self, input_count: int, record_bound: int):
        self.input_count = input_count
        self.size = min(input_count, record_bound)
        self.bits = bytearray((self.size + 7) // 8)  # position p: bit p % 8 of byte p // 8
        self.beyond: set[int] = set()  # marked positions at or above self.size

    def mark(self, pos: int) -> str | None:
        """Mark `pos`; what is wrong with it, or None."""
        if pos >= self.input_count:
            return "position beyond the input count"
        if pos < self.size:
            byte, bit = pos >> 3, 1 << (pos & 7)
            if self.bits[byte] & bit:
                return TWICE
            self.bits[byte] |= bit
            return None
        if pos in self.beyond:
            return TWICE
        self.beyond.add(pos)
        return None

    def merge(self, other: Positions, listed: int) -> tuple[int, list[int]]:
        """Take in the positions `other` (a piece of the same check) marked; (how many positions both
        hold, the first `listed` of them)."""
        mine, theirs = int.from_bytes(self.bits, "little"), int.from_bytes(other.bits, "little")
        both = mine & theirs
        self.bits = bytearray((mine | theirs).to_bytes(len(self.bits), "little"))
        twice = sorted(self.beyond & other.beyond)
        self.beyond |= other.beyond
        return both.bit_count() + len(twice), (_lowest_bits(both, listed) + twice)[:listed]

    def missing(self, listed: int) -> tuple[int, list[int]]:
        """(how many positions below the input count no output holds, the first `listed` of them)."""
        marked = int.from_bytes(self.bits, "little")
        unmarked = ~marked & ((1 << self.size) - 1)
        count = unmarked.bit_count() + (self.input_count - self.size - len(self.beyond))
        first = _lowest_bits(unmarked, listed)
        p = self.size
        while len(first) < min(listed, count) and p < self.input_count:
            if p not in self.beyond:
                first.append(p)
            p += 1
        return count, first


def _lowest_bits(value: int, listed: int) -> list[int]:
    """The positions of the lowest `listed` set bits of `value`."""
    found = []
    while value and len(found) < listed:
        low = value & -value
        found.append(low.bit_length() - 1)
        value ^= low
    return found
