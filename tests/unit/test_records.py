"""The values that cross boundaries: per-op counts and batch results add up without losing a
sample or a resume position, rejections say where the sample was, and raw lines parse in workers
into records or into the reason they cannot be records."""
from __future__ import annotations

import json

from djx.core.records import BatchResult, Item, OpCounts, Rejection, add_counters, parse_pending


def test_op_counts_add_field_by_field_and_survive_a_summary_round_trip():
    a = OpCounts(seen=10, kept=6, dropped=3, rejected=1, seconds=0.5, with_images=4, reused=2)
    b = OpCounts(seen=5, kept=5, seconds=0.25)
    total = a + b
    assert total == OpCounts(15, 11, 3, 1, 0.75, 4, 2)
    assert total.to_dict()["in"] == 15
    assert OpCounts.from_dict(json.loads(json.dumps(total.to_dict()))) == total


def test_counts_from_an_older_summary_without_the_newer_fields_read_as_zero():
    assert OpCounts.from_dict({"in": 3, "kept": 2, "dropped": 1, "rejected": 0, "seconds": 0.1}) == \
        OpCounts(3, 2, 1, 0, 0.1)


def test_batch_results_add_samples_counts_and_keep_the_latest_resume_position():
    first = BatchResult(kept=[b"a"], dropped=[b"b"], op_counts=[OpCounts(2, 1, 1)], counters={"oom_retries": 1},
                        read_at={"records": 2})
    second = BatchResult(kept=[b"c"], rejected=[Rejection(2, 3, "f", 0, "bad")], op_counts=[OpCounts(2, 1, 0, 1)],
                         counters={"oom_retries": 2, "actor_deaths": 1})
    total = first + second
    assert total.kept == [b"a", b"c"] and total.samples == 4
    assert total.op_counts == [OpCounts(4, 2, 1, 1)]
    assert total.counters == {"oom_retries": 3, "actor_deaths": 1}
    assert total.read_at == {"records": 2}  # the second carries none: the first's position stands
    assert (total + BatchResult(read_at={"records": 9})).read_at == {"records": 9}
    assert sum([first, second], BatchResult.empty(1)).samples == 4
    assert add_counters({}, {"a": 1}) == {"a": 1}


def test_a_rejection_says_which_file_and_line_and_keeps_the_record_or_its_text():
    rej = Rejection(pos=7, line=3, op="text_length_filter", op_index=0, reason="missing text key 'text'",
                    code="missing_key", record={"id": 7}, file=1)
    assert rej.to_record() == {"__dj__pos__": 7, "line": 3, "op": "text_length_filter",
                               "reason": "missing text key 'text'", "code": "missing_key", "record": {"id": 7}}
    assert rej.to_record(("a.jsonl", "b.jsonl"))["file"] == "b.jsonl"  # named only when there are several
    unparsed = Rejection(pos=0, line=1, op=None, op_index=None, reason="not valid JSON", raw='{"id": ')
    assert unparsed.to_record()["raw"] == '{"id": ' and "record" not in unparsed.to_record()


def test_on_error_fail_names_the_line_the_op_and_how_to_go_on():
    rej = Rejection(pos=4, line=5, op="image_shape_filter", op_index=1, reason="file not found: a.png", file=1)
    assert rej.fail_message(("part-0.jsonl", "part-1.jsonl")) == (
        "part-1.jsonl, line 5: file not found: a.png (op image_shape_filter); "
        "set on_error: reject to write bad samples to the rejected file and go on")
    assert Rejection(4, None, None, None, "bad").fail_message().startswith("record 4: bad;")


def test_pending_lines_parse_into_records_or_the_reason_they_cannot_be_records():
    raws = ['{"id": 1, "text": "fine"}', '{"id": 2, "text": ', "null", '"\\ud800 alone"',
            "[" * 150 + "]" * 150]
    items = [Item(pos, raw=raw, pending=True) for pos, raw in enumerate(raws)]
    items.append(Item(5, record={"id": 5}))  # parsed by the reader already: left alone
    parse_pending(items)
    assert not any(it.pending for it in items)
    assert items[0].record == {"id": 1, "text": "fine"} and items[0].error is None
    assert items[1].record is None and items[1].error.startswith("not valid JSON")
    assert items[2].record is None and items[2].error is None  # a null line: the chain rejects it as not an object
    assert items[3].record is None and "lone surrogate" in items[3].error
    assert items[4].record is None and "nested deeper than 100 levels" in items[4].error
    assert items[5].record == {"id": 5}


def test_an_integer_longer_than_python_reads_is_said_to_be_that_not_bad_json():
    import sys
    digits = sys.get_int_max_str_digits() + 1
    items = [Item(0, raw='{"text": "x", "n": ' + "9" * digits + "}", pending=True)]
    parse_pending(items)
    assert items[0].record is None
    assert items[0].error.startswith(f"not readable: it holds an integer of more than {digits - 1} digits")
