"""The pieces of a check read in several processes (core/run/check_parallel.py), without starting
any: the byte ranges hold every line once, the pieces are dealt evenly, and what the pieces found
merges into what one reader finds (positions two pieces both hold, the positions no piece holds,
the problems with their counts and first positions)."""
from __future__ import annotations

import random

from djx.core.run.check_parallel import pieces, shares
from djx.core.run.check_positions import TWICE, Positions
from djx.core.run.check_report import MAX_LISTED, CheckReport


def test_pieces_start_at_lines_and_hold_every_line_once(tmp_path):
    rng = random.Random(3)
    lines = [("x" * rng.randint(0, 300) + f" {i}\n").encode() for i in range(2000)]
    kept, dropped, empty = tmp_path / "k.jsonl", tmp_path / "d.jsonl", tmp_path / "r.jsonl"
    kept.write_bytes(b"".join(lines[:1500]))
    dropped.write_bytes(b"".join(lines[1500:]))
    empty.write_bytes(b"")
    for workers, least in ((1, 1), (3, 1), (7, 1000), (4, 1 << 30)):
        cut = pieces([("kept", str(kept)), ("dropped", str(dropped)), ("rejected", str(empty))], workers, least)
        assert all(start < end for *_, start, end in cut) and "rejected" not in {kind for kind, *_ in cut}
        seen = []
        for kind, path, start, end in cut:
            data = open(path, "rb").read()
            assert start == 0 or data[start - 1:start] == b"\n"  # a piece starts at a line's start
            assert end == len(data) or data[end - 1:end] == b"\n"
            seen += data[start:end].splitlines(keepends=True)
        assert seen == lines, (workers, least)
        total = sum(len(x) for x in lines)
        if least == 1:  # about total / workers each, a file's last piece shorter
            assert max(end - start for *_, start, end in cut) <= -(-total // workers) + 400
    assert len(pieces([("kept", str(kept))], 4, 1 << 30)) == 1  # too small to cut


def test_pieces_are_dealt_largest_first_to_the_least_loaded():
    loads = shares([50, 10, 40, 30, 20, 45], 3)
    sizes = [50, 10, 40, 30, 20, 45]
    assert sorted(i for load in loads for i in load) == list(range(6))
    assert sorted(sum(sizes[i] for i in load) for load in loads) == [60, 65, 70]
    assert shares([5], 8) == [[0]]


def test_positions_two_pieces_hold_and_those_none_holds_are_found_as_one_reader_finds_them():
    n, bound = 5000, 5010
    rng = random.Random(5)
    order = list(range(n))
    rng.shuffle(order)
    marked = order[:4000] + [17, 4999, 1234, 17]  # 17 more than once; ~1000 missing
    rng.shuffle(marked)
    one = Positions(n, bound)
    told = [p for p in marked if one.mark(p) == TWICE]
    halves = [Positions(n, bound), Positions(n, bound)]
    within = [p for k, half in enumerate(halves) for p in marked[k::2] if half.mark(p) == TWICE]
    count, first = halves[0].merge(halves[1], MAX_LISTED)
    assert sorted(within + first) == sorted(told) and count + len(within) == len(told)
    assert halves[0].missing(MAX_LISTED) == one.missing(MAX_LISTED)
    none_holds = sorted(set(range(n)) - set(marked))
    assert one.missing(3) == (len(none_holds), none_holds[:3]) and len(told) == len(marked) - len(set(marked))
    assert one.mark(n) == "position beyond the input count"


def test_positions_above_the_record_bound_merge_too():
    a, b = Positions(100, 10), Positions(100, 10)  # an input count an edited summary made large
    for p in (3, 50, 60):
        assert a.mark(p) is None
    for p in (50, 70, 3):
        assert b.mark(p) is None
    assert a.merge(b, MAX_LISTED) == (2, [3, 50])
    count, first = a.missing(5)
    assert count == 100 - 4 and first == [0, 1, 2, 4, 5]


def test_a_report_absorbs_a_pieces_problems_keeping_counts_and_the_first_positions():
    whole, first, second = CheckReport(), CheckReport(), CheckReport()
    for p in range(8):
        first.add("kept sample missing stat 'x' of op f", p)
        whole.add("kept sample missing stat 'x' of op f", p)
    for p in range(100, 106):
        second.add("kept sample missing stat 'x' of op f", p)
        whole.add("kept sample missing stat 'x' of op f", p)
    second.add("count problem", -1)
    whole.add("count problem", -1)
    merged = CheckReport()
    merged.absorb(first)
    merged.absorb(second)
    assert merged.to_dict() == whole.to_dict() and merged.describe() == whole.describe()
    assert merged.totals["kept sample missing stat 'x' of op f"] == 14
