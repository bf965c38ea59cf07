"""The dedup phase: after the streaming pass has written every sample (kept ones with their hash
stats), read the kept and dropped parts back (streaming, once per deduplicator plus once to
write), and write the samples that duplicate an earlier one as dropped by the deduplicator, naming
it (those a later filter dropped too: in Data-Juicer's op order that filter never saw them).

Exactly-once: the phase writes two new parts in the run's state folder and returns; the ledger
records them in the manifest ("move") before they replace the old, and a run interrupted anywhere
redoes the phase (before "move") or the move (after), which give the same outputs. So a stop asked
for in the phase (SIGTERM: the run's core.run.stop.Stop, checked between records) and a write
that fails (a full disk) leave it at once: its half-written parts are removed, and the failure is
said as the streaming pass says it (DjxError, Stopped); the same command redoes the phase."""
from __future__ import annotations

import json
import os
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Iterator

from djx.core.dedup.finder import DuplicateFinder, Seen
from djx.core.dedup.key_rows import DEFAULT_BUDGET, IndexSpace
from djx.core.errors import DjxError
from djx.core.io.durable import write_failed
from djx.core.io.writers import encode_line
from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY
from djx.core.records import add_counters
from djx.core.run.resume import RunCounts
from djx.core.run.stop import RUN_SAVED

CHECK_EVERY = 1024  # records read between two looks at a stop request


@dataclass(frozen=True)
class DedupResult:
    moved: int              # kept samples that became dropped duplicates
    kept_bytes: int         # the new kept part's length
    dropped_bytes: int      # the new dropped part's length


def deduplicate(ops: list, kept_part: str, dropped_part: str, rejected: str, new_kept: str,
                new_dropped: str, counts: RunCounts, image_key: str,
                budget: int = DEFAULT_BUDGET, cluster=None, stop=None) -> DedupResult | None:
    """Write `new_kept` (the kept part less its duplicates) and `new_dropped` (the dropped part, its
    duplicates dropped by the deduplicator, then the kept part's); move them in `counts`. A sample a
    later op rejected (`rejected`, with its hashes) is grouped too, and stays rejected. None when the
    chain has no deduplicator. Each index keeps up to `budget` rows in memory, the rest in
    partition files beside the parts; with a `cluster` (core.executors.ray.dedup_rows.RayGroups),
    in blocks of `budget` rows on the cluster, which forms the groups; its events go to `counts`."""
    space = IndexSpace(os.path.dirname(kept_part), budget, cluster)
    space.clear()
    finder = DuplicateFinder(ops, space)
    if not finder:
        return None
    with cluster.session() if cluster is not None else nullcontext():
        try:
            result = _rewrite(finder, ops, kept_part, dropped_part, rejected, new_kept, new_dropped, counts, image_key,
                              (lambda: stop.check(RUN_SAVED)) if stop is not None else (lambda: None))
        except BaseException as e:  # a stop, a full disk: the new parts are no one's yet (the ledger records them)
            _discard(new_kept, new_dropped)
            if isinstance(e, OSError):
                raise DjxError(write_failed(os.path.dirname(new_kept), e)) from None
            raise
        finally:
            finder.close()
    if cluster is not None:
        counts.events = add_counters(counts.events, cluster.events)
    return result


def _rewrite(finder: DuplicateFinder, ops: list, kept_part: str, dropped_part: str, rejected: str,
             new_kept: str, new_dropped: str, counts: RunCounts, image_key: str, check) -> DedupResult:
    n = len(ops)

    def every():  # a sample a later op rejected is in its group (it stays rejected)
        yield from (s for s, _, _ in _read(kept_part, dropped_part, n, check))
        yield from (s for s, _, _ in _read(rejected, None, n, check, kept=False) if s.passed)
    finder.build(every)
    moved = 0
    with open(new_kept, "wb") as keep, open(new_dropped, "wb") as drop:
        # the dropped part first, as it was, but for the duplicates a later op dropped: in Data-Juicer's
        # order the deduplicator dropped them before that op saw them; then the kept part's duplicates
        for path, out in ((dropped_part, drop), (kept_part, keep)):
            for seen, line, sample in _read(path, None, n, check, kept=out is keep):
                found = finder.duplicate_of(seen)
                if found is None:
                    out.write(line)
                    continue
                before = {k: v for k, v in (sample.get(DROP_KEY) or {}).items()
                          if k not in ("op", "op_index", "reason")}
                sample[DROP_KEY] = {"op": ops[found.op_index].name, "op_index": found.op_index,
                                    "reason": finder.op(found.op_index).reason(found.kept), **before}
                drop.write(encode_line(sample))
                _recount(counts, ops, found.op_index, seen.passed, bool(sample.get(image_key)))
                moved += out is keep
        for f in (keep, drop):
            f.flush()
            os.fsync(f.fileno())
    check()  # a stop asked for since the last record: the ledger records nothing
    return DedupResult(moved, os.path.getsize(new_kept), os.path.getsize(new_dropped))


def _read(kept_part: str | None, dropped_part: str | None, n_ops: int, check,
          kept: bool = True) -> Iterator[tuple[Seen, bytes, dict]]:
    """(what the phase needs of a sample, its line, the line parsed) for the kept part, then the
    dropped part (`_read(path, None, n, check, kept=False)`: one dropped part); `check()` every
    CHECK_EVERY lines (it raises Stopped once a stop is asked for)."""
    for path, kept in ((kept_part, kept), (dropped_part, False)):
        if path is None or not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            for i, line in enumerate(f):
                if i % CHECK_EVERY == 0:
                    check()
                if not line.strip():
                    continue
                rec = json.loads(line)
                passed = n_ops if kept else (rec.get(DROP_KEY) or rec).get("op_index") or 0  # rejected: its own
                yield Seen(rec[POSITION_KEY], rec.get(STATS_KEY) or {}, passed), line, rec


def _discard(*paths: str) -> None:
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def _recount(counts: RunCounts, ops: list, k: int, passed: int, has_images: bool) -> None:
    """Op k found a duplicate that passed `passed` ops in the streaming pass (all of them: it was
    kept; else op `passed` dropped it): op k drops it, and the ops after k never see it."""
    counts.ops[k].kept -= 1
    counts.ops[k].dropped += 1
    if passed == len(ops):
        counts.kept -= 1
        counts.dropped += 1
    else:
        counts.ops[passed].dropped -= 1
    for j in range(k + 1, min(passed + 1, len(ops))):
        counts.ops[j].seen -= 1
        counts.ops[j].kept -= j < passed
        if ops[j].uses_images and has_images:
            counts.ops[j].with_images -= 1
