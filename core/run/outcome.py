"""What became of one sample in `Pipeline.results`: kept, dropped by a filter or rejected, with
why and by which op, so an in-memory caller sees every sample as a run's three output files do."""
from __future__ import annotations

from dataclasses import dataclass
import itertools
from typing import Iterable, Iterator, Literal

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


def in_memory(chain, samples: Iterable[dict], batch_size: int, counts: dict, guard=None) -> Iterator[SampleOutcome]:
    """Pipeline.results: the chain over in-memory samples in this process, batch by batch, every
    sample's outcome in input order; `counts` is kept up to date. With deduplicators, every sample
    is held until the last is in (they pick duplicates over the whole input). `guard` (a
    run/memory_guard.MemoryGuard) copies the records and raises for a systematic failure."""
    from djx.core.dedup.finder import DuplicateFinder, split_duplicates
    from djx.core.models.pool import process_pool
    from djx.core.recipe.context import STATS_KEY
    from djx.core.records import Item
    pool = process_pool()
    it = iter(samples)
    pos = 0
    finder = DuplicateFinder(chain.ops)  # deduplicators need every sample first: kept in memory here
    held, dropped, others, grouped = [], [], [], []
    while block := list(itertools.islice(it, batch_size)):
        copy = guard.record if guard is not None else (lambda r: r)
        res = chain.run([Item(pos + i, record=copy(r)) for i, r in enumerate(block)], pool)
        pos += len(block)
        counts["input"] += len(block)
        counts["kept"] += len(res.kept)
        counts["dropped"] += len(res.dropped)
        counts["rejected"] += len(res.rejected)
        counts["rejected_records"] += [rej.to_record() for rej in res.rejected]
        if guard is not None:
            guard.batch(res)  # before its outcomes are yielded
        if not finder:
            yield from outcomes(res)
            continue
        held += res.kept
        dropped += res.dropped
        grouped += [rej for rej in res.rejected if rej.hashes]  # rejected after a deduplicator grouped them
        others += [o for o in outcomes(res) if not o.kept]
    if guard is not None:
        guard.end(counts)
    if not finder:
        return
    for sample, found in split_duplicates(finder, held, dropped, POSITION_KEY, STATS_KEY, DROP_KEY, grouped):
        if found is None:
            others.append(SampleOutcome("kept", sample, sample[POSITION_KEY]))
            continue
        counts["kept"] -= 1
        counts["dropped"] += 1
        op = chain.ops[found.op_index]
        op, why = op.name, op.reason(found.kept)
        sample[DROP_KEY] = {"op": op, "op_index": found.op_index, "reason": why}
        others.append(SampleOutcome("dropped", sample, sample[POSITION_KEY], op, why))
    yield from sorted(others, key=lambda o: o.position)  # deduplicators see every sample first

