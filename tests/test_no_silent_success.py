"""A run that could not do its job must not look like success, and a trial must not destroy a
finished run's outputs."""
from __future__ import annotations

import json


def _texts(n):
    return [{"text": f"sample number {i} with enough words"} for i in range(n)]


def test_a_trial_never_replaces_a_finished_full_runs_outputs(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", _texts(50))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export = (tmp_path / "out" / "o.jsonl").read_bytes()
    trial = djx_cli("process", recipe, "--quiet", "--limit", "5")
    assert trial.rc == 1 and "finished full run (50 kept of 50)" in trial.err and "--export-path" in trial.err
    assert (tmp_path / "out" / "o.jsonl").read_bytes() == export
    beside = djx_cli("process", recipe, "--quiet", "--limit", "5", "--export-path", tmp_path / "trial" / "o.jsonl")
    assert beside.rc == 0
    assert json.loads((tmp_path / "trial" / "o.summary.json").read_text())["kept"] == 5
    # a trial after a trial is fine, and so is a full run after a trial
    assert djx_cli("process", recipe, "--quiet", "--limit", "7", "--export-path", tmp_path / "trial" / "o.jsonl").rc == 0
    assert djx_cli("process", recipe, "--quiet", "--export-path", tmp_path / "trial" / "o.jsonl").rc == 0
