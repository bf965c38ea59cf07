"""The duplicate groups of a run's deduplicators: how many groups each found, how many samples it
removed, how large the groups are, and the samples of the largest groups.

A deduplicator writes each duplicate to the dropped output with the reason `duplicate of <position>`
(the `__dj__pos__` of the sample kept for its group). The pass counts the duplicates per kept
position, in memory that grows with the number of groups (16 bytes each, about 24 while a buffer of
new ones is folded in), never with the samples' content; only the members of the `TOP_GROUPS` largest
groups of each op are read, in a second pass (`read_members`), and only the first `SHOWN` duplicates
of each are kept.
"""
from __future__ import annotations

import heapq
import re
from array import array
from dataclasses import dataclass, field

import numpy as np

from djx.core.recipe.context import DROP_KEY, POSITION_KEY

TOP_GROUPS = 10   # groups shown per deduplicator, largest first
SHOWN = 4         # duplicates shown beside the kept sample of each of them
_BUFFER = 1 << 16  # kept positions noted before they are folded into the per-group counts (at least)
_REASON = re.compile(r"duplicate of (\d{1,18})")  # a position, as an int64 holds it


@dataclass
class Group:
    """One duplicate group: the sample kept for it and its duplicates (those shown, in input order)."""
    kept_pos: int
    size: int                      # the kept sample and its duplicates
    kept: dict | None = None       # the kept sample's item (None: not found in the outputs)
    kept_as: str = ""              # "kept", or "dropped"/"rejected" when a later op took it out
    kept_id: object = None         # the record's `id`, when it has one
    duplicates: list = field(default_factory=list)  # items of the first SHOWN duplicates

    @property
    def more(self) -> int:
        """The duplicates not shown."""
        return self.size - 1 - len(self.duplicates)


@dataclass
class OpGroups:
    """What one deduplicator found."""
    op_index: int
    op: str
    groups: int = 0
    removed: int = 0
    unwritten: int = 0   # duplicates the summary counts that the dropped output lacks (export_dropped: false)
    sizes: list = field(default_factory=list)   # (group size, groups of that size), largest first
    top: list = field(default_factory=list)     # the largest Groups, largest first (ties: input order)


class _Counts:
    """Duplicates per kept position: noted in a flat buffer, folded into sorted (position, count)
    arrays whenever the buffer fills (a quarter of the groups, at least `_BUFFER`: folds cost
    time in proportion to the duplicates, and memory about twice the arrays')."""

    def __init__(self):
        self.buffer = array("q")
        self.positions = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)

    def add(self, kept_pos: int) -> None:
        self.buffer.append(kept_pos)
        if len(self.buffer) >= max(_BUFFER, len(self.positions) // 4):
            self.fold()

    def fold(self) -> None:
        if not self.buffer:
            return
        new, n = np.unique(np.frombuffer(self.buffer, dtype=np.int64), return_counts=True)
        self.buffer = array("q")
        at = np.searchsorted(self.positions, new)
        known = at < len(self.positions)
        known[known] = self.positions[at[known]] == new[known]
        self.counts[at[known]] += n[known]  # groups seen before: counted in place
        fresh = ~known
        self.positions = np.insert(self.positions, at[fresh], new[fresh])
        self.counts = np.insert(self.counts, at[fresh], n[fresh])


class DuplicateGroups:
    """Takes every dropped record (`add`), then `finish`; then the records of `wanted()` positions
    once more (`add_member`). `deduplicators`: op index -> name of the ops known to be deduplicators;
    `others`: op indexes known not to be (a reason that reads like a duplicate's is theirs)."""

    def __init__(self, deduplicators: dict[int, str] | None = None, others=frozenset()):
        self.names = dict(deduplicators or {})
        self.others = frozenset(others)
        self._counts: dict[int, _Counts] = {}
        self.ops: list[OpGroups] = []
        self._top: dict[int, list[Group]] = {}   # kept position -> its shown groups (one an op)
        self._missing = 0
        self._members: dict[tuple, list] = {}    # (op index, kept position) -> heap of (-pos, n, item)
        self._seq = 0

    def add(self, rec: dict) -> None:
        """One dropped record: counted when a deduplicator dropped it as a duplicate."""
        found = _duplicate_of(rec)
        if found is None or found[0] in self.others:
            return
        index, name, kept_pos = found
        self.names.setdefault(index, name)
        self._counts.setdefault(index, _Counts()).add(kept_pos)

    def finish(self, summary: dict | None = None) -> None:
        """Every dropped record is in: the counts, the size distribution and the largest groups per op;
        the `summary`'s funnel says how many duplicates each op removed that the outputs do not hold."""
        self.ops = []
        rows = (summary or {}).get("ops")
        rows = rows if isinstance(rows, list) else []
        for index in sorted(self.names):
            op = OpGroups(index, self.names[index])
            counts = self._counts.get(index)
            if counts is not None:
                counts.fold()
                pos, dups = counts.positions, counts.counts
                op.groups, op.removed = len(pos), int(dups.sum())
                sizes, n = np.unique(dups + 1, return_counts=True)
                op.sizes = [(int(s), int(k)) for s, k in zip(sizes[::-1], n[::-1])]
                order = np.lexsort((pos, -dups))[:TOP_GROUPS]
                op.top = [Group(int(pos[i]), int(dups[i]) + 1) for i in order]
            row = rows[index] if index < len(rows) and isinstance(rows[index], dict) else {}
            if row.get("name") == op.op and type(row.get("dropped")) is int:
                op.unwritten = max(row["dropped"] - op.removed, 0)
            self.ops.append(op)
        self._counts = {}
        self._top = {}
        for op in self.ops:
            for g in op.top:
                self._top.setdefault(g.kept_pos, []).append(g)
        self._missing = sum(len(op.top) for op in self.ops)  # shown groups whose kept sample is not met yet
        self._members = {(op.op_index, g.kept_pos): [] for op in self.ops for g in op.top}

    def wanted(self) -> bool:
        """Whether any group has members to read in a second pass."""
        return bool(self._top)

    def add_member(self, rec: dict, kind: str, item_of) -> None:
        """One record read again ("kept", "dropped" or "rejected"): the kept sample of a shown group,
        or one of its duplicates. `item_of(record, kind)` makes what the report shows of it."""
        pos = rec.get(POSITION_KEY)
        for group in self._top.get(pos, ()) if type(pos) is int else ():
            if group.kept is None:
                sample = rec.get("record") if kind == "rejected" and isinstance(rec.get("record"), dict) else rec
                group.kept, group.kept_as, group.kept_id = item_of(rec, kind), kind, sample.get("id")
                self._missing -= 1
        found = _duplicate_of(rec) if kind == "dropped" else None
        heap = self._members.get((found[0], found[2])) if found else None
        if heap is None:
            return
        key = -pos if type(pos) is int else 0
        if len(heap) >= SHOWN and key <= heap[0][0]:
            return  # a later position than every one held
        self._seq += 1
        entry = (key, self._seq, item_of(rec, kind))
        (heapq.heappush if len(heap) < SHOWN else heapq.heapreplace)(heap, entry)

    def members_done(self) -> None:
        """The second pass is over: each shown group's duplicates, in input order."""
        for op in self.ops:
            for g in op.top:
                heap = self._members.get((op.op_index, g.kept_pos), [])
                g.duplicates = [item for _, _, item in sorted(heap, reverse=True)]
        self._members = {}

    def __bool__(self) -> bool:
        return bool(self.names)

    def kept_missing(self) -> bool:
        """Whether the second pass has yet to meet the kept sample of a shown group."""
        return self._missing > 0


def read_members(groups: DuplicateGroups, paths, item_of, step=lambda: None) -> None:
    """The second pass, only when there are groups: the kept samples of the largest groups (in the
    export, else dropped or rejected by a later op) and their first duplicates (in the dropped output)."""
    from djx.analyze.outputs import iter_records
    if not groups.wanted():
        return
    for kind, path in (("kept", paths.export), ("dropped", paths.dropped), ("rejected", paths.rejected)):
        if kind == "rejected" and not groups.kept_missing():
            break
        for rec in iter_records(path):
            step()
            groups.add_member(rec, kind, item_of)
            if kind == "kept" and not groups.kept_missing():
                break  # the duplicates are all in the dropped output
    groups.members_done()


def _duplicate_of(rec: dict) -> tuple[int, str, int] | None:
    """(op index, op name, kept position) of a record a deduplicator dropped as a duplicate."""
    drop = rec.get(DROP_KEY)
    if not isinstance(drop, dict) or type(drop.get("op_index")) is not int:
        return None
    m = _REASON.fullmatch(str(drop.get("reason", "")))
    return (drop["op_index"], str(drop.get("op") or f"op {drop['op_index']}"), int(m.group(1))) if m else None


def deduplicator_indexes(ops, summary: dict | None) -> tuple[dict[int, str], set[int]]:
    """({index: name} of the run's deduplicators, {indexes of its other ops}): from the op objects when
    given, else from the summary's op names (a name whose class is not loaded here is in neither)."""
    from djx.core.op.deduplicator import Deduplicator
    from djx.core.op.registry import find_op_class
    dedup, others = {}, set()
    if ops is not None:
        for i, op in enumerate(ops):
            if isinstance(op, Deduplicator):
                dedup[i] = op.name
            else:
                others.add(i)
        return dedup, others
    rows = (summary or {}).get("ops")
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        name = row.get("name") if isinstance(row, dict) else None
        cls = find_op_class(name) if isinstance(name, str) else None
        if cls is None:  # a plug-in not loaded here: judged by its drop reasons
            continue
        if isinstance(cls, type) and issubclass(cls, Deduplicator):
            dedup[i] = name
        else:
            others.add(i)
    return dedup, others


def format_groups(ops: list[OpGroups], top: int = TOP_GROUPS) -> str:
    """The printed part: per deduplicator its groups, removed samples, sizes and largest groups."""
    lines = ["duplicate groups (a group: the sample kept and its duplicates):"]
    for op in ops:
        if op.unwritten:
            lines.append(f"  {op.op_index}. {op.op}: {op.unwritten} duplicates removed are not in the dropped "
                         f"output (export_dropped: false?): " + ("no groups to show" if not op.groups else
                                                                 "the groups below count the others only"))
        if not op.groups:
            if not op.unwritten:
                lines.append(f"  {op.op_index}. {op.op}: no duplicates")
            continue
        lines.append(f"  {op.op_index}. {op.op}: {op.groups} group{'s' * (op.groups != 1)}, "
                     f"{op.removed} sample{'s' * (op.removed != 1)} removed")
        shown = ", ".join(f"{k} group{'s' * (k != 1)} of {s} samples" for s, k in op.sizes[:top])
        more = f", and {len(op.sizes) - top} smaller sizes" if len(op.sizes) > top else ""
        lines.append(f"     by size: {shown}{more}")
        for i, g in enumerate(op.top[:top]):
            kept = f"#{g.kept_pos}" + (f" (id {g.kept_id!r})" if g.kept_id is not None else "")
            note = f", itself {g.kept_as} by a later op" if g.kept_as in ("dropped", "rejected") else ""
            lines.append(f"     {'largest:' if i == 0 else '':<8} {g.size} samples, kept {kept}{note}")
    return "\n".join(lines)
