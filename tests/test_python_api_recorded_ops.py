"""A run built from op objects (Pipeline(ops=[...]).run()) records the ops it ran in its summary,
as a recipe's process list says them, so `djx check`, `djx explain` and `djx analyze` of its export
read their thresholds as they do for a recipe's run."""
from __future__ import annotations

import json

import pytest

from djx import Pipeline
from djx.ops.filter.text_length_filter import TextLengthFilter


@pytest.mark.slow
def test_a_run_of_op_objects_records_its_ops_and_djx_check_judges_by_them(tmp_path, text_dataset, djx_cli):
    export = tmp_path / "out" / "kept.jsonl"
    summary = Pipeline(ops=[TextLengthFilter(min_len=4, max_len=9)], np=1, start_method="fork").run(
        str(text_dataset.path), str(export), progress=False, log=lambda line: None)
    assert summary["recipe"]["process"] == [{"text_length_filter": {"min_len": 4, "max_len": 9}}]
    res = djx_cli("check", export)
    assert res.rc == 0, res.out + res.err
    assert "check passed" in res.out
    assert "min_len 4" in djx_cli("explain", export, 0).out

    # the recorded thresholds are what the check judges by: a kept sample edited below them fails
    lines = export.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["__dj__stats__"]["text_len"] = 1
    export.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n", encoding="utf-8")
    res = djx_cli("check", export)
    assert res.rc == 1 and "fails op 0 (text_length_filter)" in res.out
