"""A parsed record goes on only if it can be written back out as UTF-8 JSON and sent to a worker:
a lone surrogate escape or nesting deeper than 100 levels rejects that record alone, instead of
killing the run wherever the record goes next."""
from __future__ import annotations

import json

from djx.core.io.record_limits import MAX_DEPTH, encoded, output_problem, record_problem


def problem(text: str):
    return record_problem(json.loads(text), text)


def test_ordinary_records_have_no_problem():
    assert problem('{"text": "caf\\u00e9 \\ud83d\\ude00 paired surrogates are fine", "n": [1, [2, [3]]]}') is None
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert problem(nested) is None  # at the limit: fine
    assert problem('{"text": "' + "[" * 500 + '"}') is None  # brackets inside a string are not nesting


def test_a_lone_surrogate_is_named():
    assert "lone surrogate '\\ud800'" in problem('{"text": "half a pair: \\ud800"}')


def test_nesting_deeper_than_the_limit_is_refused_with_the_limit():
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert problem(deep) == ("nested deeper than 100 levels of arrays and objects; djx takes records "
                             "nested at most 100 deep")


def test_what_an_op_put_into_a_sample_is_checked_before_it_is_written():
    assert output_problem({"text": "fine", "__dj__stats__": {"score": 0.5}}) is None
    assert "lone surrogate" in output_problem({"text": "\ud800"})
    cycle = {"text": "t"}
    cycle["self"] = cycle
    assert output_problem(cycle).startswith("cannot be written as JSON (ValueError")
    assert encoded({"a": 1}, lambda v: b"line") == (b"line", None)
