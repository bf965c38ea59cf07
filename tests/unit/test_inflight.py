"""The local engine's books of batches in flight: a batch is emitted once every one of its samples
is accounted for, whatever order its parts (retries, bisected halves) come back in, with its
samples in input order and the reader position a checkpoint resumes from."""
from __future__ import annotations

from djx.core.executors.local.inflight import InFlight
from djx.core.records import BatchResult, OpCounts, Rejection


def part(*positions: int, rejected: tuple[int, ...] = ()) -> BatchResult:
    """What a worker sends back for the samples at `positions` (kept) and `rejected`."""
    return BatchResult(kept=[f"sample {p}".encode() for p in positions],
                       rejected=[Rejection(p, p + 1, "poison_filter", 0, "worker died") for p in rejected],
                       op_counts=[OpCounts(seen=len(positions) + len(rejected), kept=len(positions))])


def books(batch_no: int, n_items: int, read_at: dict) -> InFlight:
    fl = InFlight()
    fl.missing[batch_no], fl.parts[batch_no], fl.read_at[batch_no] = n_items, [], read_at
    return fl


def test_a_batch_is_held_back_until_every_sample_is_accounted_for():
    fl = books(0, 5, {"records": 5})
    fl.add_part(0, 3, part(3, 4), 2)
    assert fl.pop_complete(0, n_ops=1) is None
    fl.add_part(0, 0, part(0, 1, rejected=(2,)), 3)
    assert fl.pop_complete(0, n_ops=1) is not None


def test_parts_that_come_back_out_of_order_are_merged_in_input_order():
    """A worker died on the batch: its halves were retried, and the second half finished first."""
    fl = books(7, 6, {"records": 48, "offset": 1234})
    fl.add_part(7, 4, part(4, 5), 2)
    fl.add_part(7, 2, part(3, rejected=(2,)), 2)
    fl.add_part(7, 0, part(0, 1), 2)
    merged = fl.pop_complete(7, n_ops=1)
    assert merged.kept == [b"sample 0", b"sample 1", b"sample 3", b"sample 4", b"sample 5"]
    assert [r.pos for r in merged.rejected] == [2]
    assert merged.op_counts == [OpCounts(seen=6, kept=5)]
    assert merged.read_at == {"records": 48, "offset": 1234}  # a checkpoint after it resumes here


def test_a_batch_is_emitted_once_and_other_batches_wait_their_turn():
    fl = books(0, 2, {"records": 2})
    fl.missing[1], fl.parts[1], fl.read_at[1] = 1, [], {"records": 3}
    fl.add_part(1, 2, part(2), 1)
    assert fl.pop_complete(0, n_ops=1) is None  # batch 1 is done, batch 0 is not
    fl.add_part(0, 0, part(0, 1), 2)
    assert fl.pop_complete(0, n_ops=1).kept == [b"sample 0", b"sample 1"]
    assert fl.pop_complete(0, n_ops=1) is None  # its books are closed
    assert fl.pop_complete(1, n_ops=1).read_at == {"records": 3}
    assert not (fl.missing or fl.parts or fl.read_at)
