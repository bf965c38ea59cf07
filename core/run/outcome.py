"""What became of one sample in `Pipeline.results`: kept, dropped by a filter or rejected, with
why and by which op, so an in-memory caller sees every sample as a run's three output files do."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from djx.core.recipe.context import DROP_KEY, POSITION_KEY
from djx.core.records import BatchResult


@dataclass(frozen=True)
class SampleOutcome:
    """One input sample's fate. `sample`: the sample with its stats (kept, dropped), or the input
    record as given (rejected). `op`/`reason`: the filter that dropped it and why, or what rejected
    it (`code`, e.g. bad_image); None for a kept sample. `position`: its index in the input."""
    outcome: Literal["kept", "dropped", "rejected"]
    sample: dict | None
    position: int
    op: str | None = None
    reason: str | None = None
    code: str | None = None

    @property
    def kept(self) -> bool:
        return self.outcome == "kept"


def outcomes(result: BatchResult) -> list[SampleOutcome]:
    """Every sample of one batch's result, in input order."""
    out = [SampleOutcome("kept", s, s[POSITION_KEY]) for s in result.kept]
    out += [SampleOutcome("dropped", s, s[POSITION_KEY], s[DROP_KEY]["op"], s[DROP_KEY]["reason"])
            for s in result.dropped]
    out += [SampleOutcome("rejected", r.record if isinstance(r.record, dict) else None, r.pos, r.op, r.reason, r.code)
            for r in result.rejected]
    return sorted(out, key=lambda o: o.position)
