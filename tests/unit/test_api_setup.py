"""Pipeline(...) as a Python caller makes it: one list of ops (op objects or a recipe's process
list, never both silently), and run() told plainly when it lacks its paths."""
from __future__ import annotations

import pytest

from djx import Pipeline, UsageError
from djx.ops.filter.text_length_filter import TextLengthFilter


def test_ops_and_process_together_are_refused():
    with pytest.raises(UsageError, match="ops=.*process=.*not both"):
        Pipeline(ops=[TextLengthFilter(min_len=25)], process=[{"text_length_filter": {"min_len": 100}}])


def test_ops_with_a_recipe_that_has_its_own_process_list_are_refused(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_path: in.jsonl\nexport_path: out/x.jsonl\n"
                      "process:\n  - text_length_filter: {min_len: 100}\n", encoding="utf-8")
    with pytest.raises(UsageError, match="own process list"):
        Pipeline(ops=[TextLengthFilter(min_len=25)], recipe=str(recipe))


def test_run_without_paths_says_it_needs_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pipe = Pipeline(ops=[TextLengthFilter(min_len=5)])
    with pytest.raises(UsageError, match=r"run\(\) needs dataset_path and export_path") as e:
        pipe.run(progress=False, log=lambda line: None)
    assert "unset" not in str(e.value)
    with pytest.raises(UsageError, match=r"needs export_path") as e:
        pipe.run(str(tmp_path / "in.jsonl"), progress=False, log=lambda line: None)
    assert not (tmp_path / "unset.jsonl").exists()


def test_paths_given_to_the_pipeline_are_enough_for_run(tmp_path):
    pipe = Pipeline(ops=[TextLengthFilter(min_len=5)], dataset_path=str(tmp_path / "missing.jsonl"),
                    export_path=str(tmp_path / "out" / "x.jsonl"))
    with pytest.raises(Exception, match="dataset not found: .*missing.jsonl"):
        pipe.run(progress=False, log=lambda line: None)
