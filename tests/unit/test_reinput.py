"""djx's outputs read back as inputs: a kept or dropped sample keeps its stats (for reuse) and its
first run's position, loses the earlier verdict; a line of a rejected file is read as the record
that was rejected, so fixed images or a new recipe can be tried on exactly those samples."""
from __future__ import annotations

from djx.core.io.reinput import input_sample, is_rejected_record, unwrap_rejected
from djx.core.records import Item, Rejection

POS, ORIG, STATS, DROP = "__dj__pos__", "__dj__orig_pos__", "__dj__stats__", "__dj__drop__"


def test_a_dropped_sample_read_again_loses_its_verdict_and_keeps_its_stats_and_first_position():
    read = {"text": "t", STATS: {"text_len": 1}, DROP: {"op": "text_length_filter"}, POS: 17}
    sample = input_sample(read, pos=3)
    assert sample == {"text": "t", STATS: {"text_len": 1}, POS: 3, ORIG: 17}
    sample[STATS]["new_stat"] = 1.0
    assert read[STATS] == {"text_len": 1} and read[POS] == 17  # the record as read stays as it was
    assert input_sample({**read, ORIG: 5}, pos=3)[ORIG] == 5  # the first run's position travels on
    assert ORIG not in input_sample({"text": "t", POS: True}, pos=0)


def test_a_line_of_a_rejected_file_is_read_as_the_record_that_was_rejected():
    line = Rejection(pos=9, line=10, op="image_shape_filter", op_index=0, reason="file not found: a.png",
                     record={"text": "t", "images": ["a.png"]}).to_record()
    assert is_rejected_record(line)
    item = Item(0, record=line)
    unwrap_rejected(item)
    assert item.record == {"text": "t", "images": ["a.png"], ORIG: 9} and item.error is None


def test_a_rejected_line_that_never_parsed_is_rejected_again_with_the_earlier_reason():
    line = Rejection(pos=4, line=5, op=None, op_index=None, reason="not valid JSON", raw='{"text": ').to_record()
    item = Item(0, record=line)
    unwrap_rejected(item)
    assert (item.record, item.raw) == (None, '{"text": ')
    assert item.error == "read from a rejected file, where it was rejected as: not valid JSON"


def test_an_ordinary_record_with_a_reason_field_is_not_taken_for_a_rejected_line():
    record = {POS: 1, "reason": "a user's own field", "record": {}, "text": "t"}
    assert not is_rejected_record(record)
    item = Item(0, record=record)
    unwrap_rejected(item)
    assert item.record is record
