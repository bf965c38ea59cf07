"""`djx analyze` on a run whose summary is older or hand-written: what cannot be read is said and
left out; the analysis of the outputs is still made."""
from __future__ import annotations

import json

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("ops, said", [(5, "not a list but int"), ([1], "ops[0] is int, not an object"),
                                       ([{"name": "text_length_filter"}], "ops[0] lacks in, kept, dropped, rejected")])
def test_a_summary_with_unreadable_op_counts_is_said_not_a_traceback(tmp_path, write_jsonl, write_recipe, djx_cli,
                                                                      ops, said):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "hello world here"}, {"text": "x"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 3}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    summary = tmp_path / "out" / "o.summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "ops": ops}))
    res = djx_cli("analyze", tmp_path / "out" / "o.jsonl", "--recipe", recipe)
    assert res.rc == 0, res.err
    assert f"has no usable ops ({said}): the funnel is left out" in res.out + res.err
    assert (tmp_path / "out" / "o.analysis" / "report.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize("fields, said", [({"input": "twelve"}, 'input ("twelve" is not a count)'),
                                          ({"input": -3, "dropped": 1.5}, "input (-3 is not a count)"),
                                          ({"dataset_path": 5}, "dataset_path (5 is not a text)"),
                                          ({"timing": "fast"}, 'timing ("fast" is not an object of seconds)'),
                                          ({"time_breakdown": {"ops": {"x": {"forward": None}}}},
                                           'time_breakdown ({"ops": {"x": {"forward": null}}} is not an object of seconds)')])
def test_a_summary_with_wrong_typed_fields_is_said_by_check_analyze_and_explain(
        tmp_path, write_jsonl, write_recipe, djx_cli, fields, said):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "hello world here"}, {"text": "x"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 3}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    summary = tmp_path / "out" / "o.summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), **fields}))
    export = tmp_path / "out" / "o.jsonl"
    for args in (("check", export, "--recipe", recipe), ("analyze", export), ("explain", export, "0")):
        res = djx_cli(*args)
        assert "Traceback" not in res.err and res.rc == 0, (args, res.err)
        if args[0] != "explain":
            assert f"has no usable {said}: left out" in res.out + res.err, args
    res = djx_cli("check", export, "--recipe", recipe)
    assert "check passed" in res.out and ("counts were not checked" in res.out) == ("input" in fields)
