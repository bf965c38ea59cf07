"""core/run/mapped.py: the texts a verdict trace carries once a mapper changed a sample (bounded),
and which samples a mapper changed (a list changed in place too)."""
from __future__ import annotations

from djx import Mapper, POSITION_KEY, STATS_KEY
from djx.core.run.mapped import TRACE_CHARS, as_read, bounded, changed, seen_by_op, snapshot
from djx.ops.filter.text_length_filter import TextLengthFilter


class _Noop(Mapper):
    def process(self, batch):
        pass


def test_the_trace_carries_the_other_text_only_when_it_differs_and_bounded():
    record, same, mapped = {"text": "“a”"}, {"text": "“a”"}, {"text": '"a"'}
    assert seen_by_op(record, same, "text") is None and as_read(record, same, "text") == {}
    assert seen_by_op(record, mapped, "text") == '"a"'
    assert as_read(record, mapped, "text") == {"text_as_read": "“a”"}
    assert seen_by_op(record, {"text": 3}, "text") is None and as_read(None, mapped, "text") == {}
    long = "x" * (TRACE_CHARS + 5)
    assert bounded(long) == "x" * TRACE_CHARS + f"... ({TRACE_CHARS + 5:,} characters in all)"
    assert bounded("short") == "short"


def test_changed_finds_what_a_mapper_changed_and_ignores_djx_keys():
    samples = [{"text": "a", "images": ["1.png"], POSITION_KEY: 0, STATS_KEY: {}},
               {"text": "b", "images": ["2.png"], POSITION_KEY: 1},
               {"text": "c", POSITION_KEY: 2}]
    before = snapshot(_Noop(), samples, [0, 1, 2])
    samples[0][STATS_KEY]["text_len"] = 1  # djx's keys are not the sample's content
    samples[0][POSITION_KEY] = 9
    samples[1]["images"].append("3.png")  # changed in place
    samples[2] = {"text": "C", POSITION_KEY: 2}  # replaced
    assert changed(before, samples) == [samples[1], samples[2]]
    assert snapshot(TextLengthFilter(), samples, [0, 1, 2]) == {}
