"""Output checks, run after every run and by `djx check`.

Stats completeness: a kept sample carries every stat of every filter; a dropped sample carries the
stats of every filter up to and including the one that dropped it; every value is a finite number
(or a list of them, non-empty when the sample has images). Accounting: input = kept + dropped +
rejected and every input position appears exactly once across the three files; a file the run
wrote (its summary lists it) is there. Verdicts: given
the recipe's ops, every kept sample passes every filter on its recorded stats, and every dropped
sample fails the op its `__dj__drop__` names (an export made with other thresholds, or a stat
edited afterwards, fails the check).
"""
from __future__ import annotations

import os
import re

from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY
from djx.core.io.output_reader import iter_jsonl_range, iter_output, jsonl_alone, record_bound
from djx.core.io.outputs import OutputPaths
from djx.core.op.base import LIST_SHAPES, Filter
from djx.core.op.deduplicator import Deduplicator
from djx.core.run.chain import _BadVerdict, _verdict
from djx.core.run.check_parallel import PIECE_BYTES, forked, pieces, shares
from djx.core.run.check_positions import TWICE, Positions
from djx.core.run.check_report import MAX_LISTED, CheckReport
from djx.core.run.check_signatures import Signatures
from djx.core.run.check_values import bad_value, out_of_range

# -- verdicts: the recipe's filters re-applied to the recorded stats (no model, no image) ----------

class Judge:
    """The recipe's ops, asked for their verdict on recorded stats."""

    def __init__(self, ops: list):
        self.ops = list(ops)

    def kept(self, stats: dict) -> list[str]:
        """Problems of a kept sample: each filter it does not pass."""
        problems = []
        for k, op in enumerate(self.ops):
            if isinstance(op, Filter):
                keep, problem = self._ask(op, k, stats)
                if problem or not keep:
                    problems.append(problem or f"kept sample fails op {k} ({op.name}) on its recorded stats "
                                               f"(exported with other thresholds, or a stat edited since?)")
        return problems

    def dropped(self, stats: dict, op_index: int, drop: dict | None = None, pos=None) -> list[str]:
        """Problems of a dropped sample: the op that dropped it passes it (a deduplicator: its
        reason names no earlier sample)."""
        op = self.ops[op_index]
        if isinstance(op, Deduplicator):
            found = re.fullmatch(rf"{op.duplicate_word} (\d+)", str((drop or {}).get("reason")))
            if found and isinstance(pos, int) and int(found.group(1)) < pos:
                return []
            return [f"dropped sample names op {op_index} ({op.name}), a deduplicator, but not an earlier "
                    f"sample it duplicates (reason `{op.duplicate_word} <position>`)"]
        if not isinstance(op, Filter):
            return [f"dropped sample names op {op_index} ({op.name}), which is not a filter"]
        keep, problem = self._ask(op, op_index, stats)
        if problem:
            return [problem]
        if keep:
            return [f"dropped sample passes op {op_index} ({op.name}) that its drop names, on its recorded "
                    f"stats (exported with other thresholds, or a stat edited since?)"]
        return []

    @staticmethod
    def _ask(op: Filter, k: int, stats: dict) -> tuple[bool, str | None]:
        try:
            keep, _ = _verdict(op, op.keep(dict(stats)))
            return keep, None
        except KeyboardInterrupt:
            raise
        except _BadVerdict:
            return False, f"op {k} ({op.name}).keep gives no verdict on the recorded stats"
        except Exception as e:  # noqa: BLE001  a plug-in's keep() on stats it did not expect
            return False, f"op {k} ({op.name}).keep raised {type(e).__name__} on the recorded stats"


def written_outputs(summary: dict) -> tuple[str, ...]:
    """The outputs besides the export that the run of `summary` wrote ("dropped", "rejected", "stats"): those
    its "outputs" name, or for a summary without them, the dropped file its recipe exported."""
    outs = summary.get("outputs")
    if isinstance(outs, dict):
        return tuple(kind for kind in ("dropped", "rejected", "stats") if outs.get(kind))
    recipe = summary.get("recipe")
    return ("dropped",) if isinstance(recipe, dict) and recipe.get("export_dropped") is True else ()


def check_outputs(kept_path: str, dropped_path: str | None, rejected_path: str | None,
                  filters: list[tuple[str, tuple[str, ...]]], image_key: str = "images",
                  input_count: int | None = None, dropped_count: int | None = None,
                  ops: list | None = None, written: tuple[str, ...] = (), verify_key: bytes | None = None,
                  claimed: dict | None = None, workers: int = 1, piece_bytes: int = PIECE_BYTES,
                  signed_form=None) -> CheckReport:
    """Check the three output files against the op list [(op name, stats keys), ...].

    Without a dropped file (export_dropped: false), `dropped_count` (from the summary) stands in
    for it in the count check. `written`: the outputs the run wrote ("dropped", "rejected"; from
    its summary, written_outputs): one that is missing fails the check. With `ops` (the recipe's
    ops, in the order of `filters`), each sample's verdicts are re-applied to its recorded stats.
    With `verify_key` (djx check: this user's stats key), samples whose stats it does not vouch for
    are counted in a note (`signed_form`: the sample a record was signed as, for a LLaVA export's
    records; run/formats.py). `claimed`: the counts a run summary states ({"kept": n, ...}), each of
    which must be what the outputs hold. `workers` > 1: JSON Lines outputs of at least 2 x
    `piece_bytes` are read in up to that many processes (check_parallel.py), with the same findings."""
    bound = sum(record_bound(p) for p in (kept_path, dropped_path, rejected_path))
    check = _OutputCheck(filters, image_key, input_count, Judge(ops) if ops is not None else None, bound)
    check.signatures = Signatures(verify_key, signed_form) if verify_key is not None else None
    stats_path = OutputPaths.for_export(kept_path).stats if "stats" in written else None  # djx check: an export
    for kind, path in (("dropped", dropped_path), ("rejected", rejected_path), ("stats", stats_path)):
        if kind in written and not (path and os.path.exists(path)):
            check.report.add(f"the {kind} file {path} is missing, although the run wrote it (its summary "
                             f"lists it): restore it, or run again", -1)
    check.ranges = {op.name: dict(op.stat_ranges) for op in ops or () if isinstance(op, Filter)}
    check.shapes = {op.name: dict(op.stat_shapes) for op in ops or () if isinstance(op, Filter)}
    has_dropped = bool(dropped_path and os.path.exists(dropped_path))
    files = [("kept", kept_path)] + [(kind, path) for kind, path in (("dropped", dropped_path), ("rejected", rejected_path))
                                     if path and os.path.exists(path)]
    if not (workers > 1 and check.read_in_pieces(files, workers, piece_bytes)):
        for kind, path in files:
            for _, rec in iter_output(path):
                check.take(kind, rec)
    if not has_dropped:
        check.counts["dropped"] = dropped_count
    return check.finish(has_dropped, claimed or {})


class _OutputCheck:
    """One pass over the outputs: stats per record, positions across all three files."""

    def __init__(self, filters: list[tuple[str, tuple[str, ...]]], image_key: str, input_count: int | None,
                 judge: Judge | None = None, record_bound: int = 0):
        self.filters, self.image_key, self.input_count = filters, image_key, input_count
        self.judge = judge
        self.ranges: dict[str, dict] = {}  # op name -> its stat_ranges: a value outside is impossible
        self.shapes: dict[str, dict] = {}  # op name -> its stat_shapes (known when the ops are)
        self.report = CheckReport()
        self.index_of: dict[str, int] = {}
        for i, (name, _) in enumerate(filters):
            self.index_of.setdefault(name, i)
        self.bound = record_bound
        self.positions = Positions(input_count, record_bound) if input_count is not None else None
        self.signatures: Signatures | None = None
        self.counts = {"kept": 0, "dropped": 0, "rejected": 0}
        self._takers = {"kept": self.kept, "dropped": self.dropped, "rejected": self.rejected}

    def take(self, kind: str, rec: dict) -> None:
        self._takers[kind](rec)

    def read_in_pieces(self, files: list[tuple[str, str]], workers: int, piece_bytes: int) -> bool:
        """Read the (kind, path) files in pieces of `piece_bytes` or more in up to `workers` processes
        and take in what each found; False (nothing taken) where they are not all lone JSON Lines
        files, are too small to cut, or a process failed."""
        if not all(jsonl_alone(path) for _, path in files) \
                or sum(os.path.getsize(path) for _, path in files) < 2 * piece_bytes:
            return False
        cut = pieces(files, workers, piece_bytes)
        sizes = [end - start for *_, start, end in cut]
        found = forked(self._read_piece, cut, sizes, workers) if len(cut) > 1 else None
        self.report.readers = len(shares(sizes, workers)) if found is not None else 1
        for counts, report, positions, signatures in found or ():
            for kind, n in counts.items():
                self.counts[kind] += n
            self.report.absorb(report)
            if self.positions is not None:
                count, first = self.positions.merge(positions, MAX_LISTED)
                for i, p in enumerate(first):
                    self.report.add(TWICE, p, count - len(first) + 1 if i == 0 else 1)
            if self.signatures is not None:
                self.signatures.absorb(signatures)
        return found is not None

    def _read_piece(self, piece: tuple[str, str, int, int]) -> tuple:
        """In a forked process: one piece read by a check of this one's setup; what it found."""
        kind, path, start, end = piece
        twin = _OutputCheck(self.filters, self.image_key, self.input_count, self.judge, self.bound)
        twin.ranges, twin.shapes = self.ranges, self.shapes
        twin.signatures = self.signatures.twin() if self.signatures is not None else None
        for rec in iter_jsonl_range(path, start, end):
            twin.take(kind, rec)
        return twin.counts, twin.report, twin.positions, twin.signatures

    def kept(self, sample: dict) -> None:
        self.counts["kept"] += 1
        if self.signatures is not None:
            self.signatures.see(sample, sample.get(POSITION_KEY))
        self._mark(sample.get(POSITION_KEY), "kept")
        if self._check_stats(sample, len(self.filters) - 1, "kept") and self.judge:
            for problem in self.judge.kept(sample.get(STATS_KEY)):
                self.report.add(problem, sample.get(POSITION_KEY))

    def dropped(self, sample: dict) -> None:
        self.counts["dropped"] += 1
        if self.signatures is not None:
            self.signatures.see(sample, sample.get(POSITION_KEY))
        self._mark(sample.get(POSITION_KEY), "dropped")
        drop = sample.get(DROP_KEY) or {}
        upto = drop.get("op_index", self.index_of.get(drop.get("op"), -1))
        if not isinstance(upto, int) or not 0 <= upto < len(self.filters) \
                or self.filters[upto][0] != drop.get("op"):
            self.report.add(f"dropped sample without a valid {DROP_KEY} op", sample.get(POSITION_KEY))
            return
        if self._check_stats(sample, upto, "dropped") and self.judge:
            for problem in self.judge.dropped(sample.get(STATS_KEY), upto, drop, sample.get(POSITION_KEY)):
                self.report.add(problem, sample.get(POSITION_KEY))

    def rejected(self, rec: dict) -> None:
        self.counts["rejected"] += 1
        self._mark(rec.get(POSITION_KEY), "rejected")
        if not rec.get("reason"):
            self.report.add("rejected record without a reason", rec.get(POSITION_KEY))

    def finish(self, has_dropped: bool, claimed: dict) -> CheckReport:
        """The count check (and the `claimed` counts) and the positions no output holds; the report."""
        counts, n = self.counts, self.input_count
        for kind, said in claimed.items():
            if type(said) is int and counts.get(kind) is not None and counts[kind] != said:
                self.report.add(f"the run summary says {said} {kind}, the outputs hold {counts[kind]}: the "
                                f"summary or the outputs were changed since the run", -1)
        if n is not None:
            counts["input"] = n
            if counts["dropped"] is not None:
                total = counts["kept"] + counts["dropped"] + counts["rejected"]
                if total != n:
                    self.report.add(f"count mismatch: input {n} != kept {counts['kept']} + dropped "
                                    f"{counts['dropped']} + rejected {counts['rejected']} = {total}", -1)
            if counts["dropped"] is not None and has_dropped:
                count, first = self.positions.missing(MAX_LISTED)
                for i, p in enumerate(first):
                    self.report.add("input sample missing from every output", p, count - len(first) + 1 if i == 0 else 1)
        self.report.counts = counts
        note = self.signatures and self.signatures.note()
        if note:
            self.report.notes.append(note)
        return self.report

    def _mark(self, pos, kind: str) -> None:
        if not isinstance(pos, int) or pos < 0:
            self.report.add(f"{kind} record without a valid {POSITION_KEY}", pos)
            return
        if self.positions is not None and (problem := self.positions.mark(pos)):
            self.report.add(problem, pos)

    def _check_stats(self, sample: dict, upto: int, kind: str) -> bool:
        """Report missing or malformed stats of the filters up to `upto`; True when all are sound."""
        stats = sample.get(STATS_KEY)
        pos = sample.get(POSITION_KEY)
        has_images = bool(sample.get(self.image_key))
        sound = True
        for name, keys in self.filters[:upto + 1]:
            for k in keys:
                if not isinstance(stats, dict) or k not in stats:
                    self.report.add(f"{kind} sample missing stat {k!r} of op {name}", pos)
                    sound = False
                    continue
                # an empty list is wrong for a sample with images only where the list is one per image
                # or chunk (a list of another length, e.g. one per entity of the text, may be empty)
                per_image = name not in self.shapes or self.shapes[name].get(k) in LIST_SHAPES
                bad = (bad_value(stats[k], has_images and per_image)
                       or out_of_range(stats[k], self.ranges.get(name, {}).get(k)))
                if bad:
                    self.report.add(f"{kind} sample has stat {k!r} of op {name} {bad}", pos)
                    sound = False
        return sound
