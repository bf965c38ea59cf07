"""`djx check`'s look at the stats signatures: how many samples of an export carry stats that this
user's key does not vouch for (core/run/provenance.py signs what djx writes). Such stats were edited
after djx wrote them, or written under another key (another user or machine), or read as trusted
input stats: the verdicts are still re-checked on them as recorded, and the check says so in a note,
since a received export is checked under the receiver's key."""
from __future__ import annotations

from djx.core.run.provenance import signed_by

LISTED = 10


class Signatures:
    """`signed_form`: the djx sample an output record was signed as (a LLaVA export's records are
    mapped back, run/formats.py signed_form); None: as written."""

    def __init__(self, key: bytes, signed_form=None):
        self.key, self.signed_form, self.samples, self.unsigned, self.first = key, signed_form, 0, 0, []

    def twin(self) -> Signatures:
        """An empty account of the same check, for a piece of it."""
        return Signatures(self.key, self.signed_form)

    def see(self, sample: dict, pos) -> None:
        self.samples += 1
        if not signed_by(self.key, self.signed_form(sample) if self.signed_form else sample):
            self.unsigned += 1
            if len(self.first) < LISTED:
                self.first.append(pos)

    def absorb(self, other: Signatures) -> None:
        """Take in what a piece of the same check saw."""
        self.samples, self.unsigned = self.samples + other.samples, self.unsigned + other.unsigned
        self.first += other.first[:LISTED - len(self.first)]

    def note(self) -> str | None:
        if not self.key:
            return "no stats key could be had here: the stats signatures were not verified"
        if not self.unsigned:
            return None
        shown = ", ".join(str(p) for p in self.first) + (" ..." if self.unsigned > len(self.first) else "")
        return (f"{self.unsigned} of {self.samples} kept and dropped samples carry stats this user's key does not "
                f"vouch for (positions {shown}): edited since djx wrote them, written under another user's or "
                f"machine's key, or trusted input stats; their verdicts were checked on the stats as recorded")
