"""`djx check` fails an export whose dropped or rejected file, written by the run, is missing, and
names it; an export made with export_dropped: false still passes on its summary's dropped count."""
from __future__ import annotations

import json


def test_djx_check_names_a_missing_file_the_run_wrote(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 30)} for i in range(200)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 10}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export = tmp_path / "out" / "o.jsonl"
    assert djx_cli("check", export).rc == 0
    (tmp_path / "out" / "o.dropped.jsonl").unlink()
    res = djx_cli("check", export)
    assert res.rc == 1 and "the dropped file" in res.out and "o.dropped.jsonl is missing" in res.out
    (tmp_path / "out" / "o.rejected.jsonl").unlink()
    assert "o.rejected.jsonl is missing" in djx_cli("check", export).out
    unexported = write_recipe(tmp_path / "u.yaml", dataset_path=str(data), export_path="u/o.jsonl", np=1,
                              export_dropped=False, process=[{"text_length_filter": {"min_len": 10}}])
    assert djx_cli("process", unexported, "--quiet").rc == 0
    res = djx_cli("check", tmp_path / "u" / "o.jsonl")
    assert res.rc == 0 and "check passed: 200 input = 130 kept + 70 dropped" in res.out


def test_djx_check_names_a_missing_or_cut_stats_file_and_a_summary_whose_counts_the_files_contradict(
        tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 30)} for i in range(200)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          keep_stats_in_res_ds=False, process=[{"text_length_filter": {"min_len": 10}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export, stats = tmp_path / "out" / "o.jsonl", tmp_path / "out" / "o_stats.jsonl"
    assert djx_cli("check", export).rc == 0
    rows = stats.read_text().splitlines(keepends=True)
    stats.write_text("".join(rows[:-1]))  # the last row cut off
    res = djx_cli("check", export)
    assert res.rc == 1 and f"{stats}: no row for the export's record {len(rows)}" in res.out + res.err
    stats.write_text("".join(rows + rows[:1]))  # a row too many
    res = djx_cli("check", export)
    assert res.rc == 1 and "more rows than the export's 130 record(s)" in res.out + res.err
    stats.unlink()
    res = djx_cli("check", export)
    assert res.rc == 1 and f"the stats file {stats} is missing" in res.out
    stats.write_text("".join(rows))
    summary_path = tmp_path / "out" / "o.summary.json"
    summary = json.loads(summary_path.read_text())
    assert (summary["kept"], summary["dropped"]) == (130, 70)
    summary_path.write_text(json.dumps({**summary, "kept": 129, "dropped": 71}))  # the input count still adds up
    res = djx_cli("check", export)
    assert res.rc == 1 and "the run summary says 129 kept, the outputs hold 130" in res.out
    assert "the run summary says 71 dropped, the outputs hold 70" in res.out


def test_djx_check_of_an_export_whose_run_has_not_finished_says_to_resume_it(tmp_path, write_jsonl, write_recipe,
                                                                             djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": f"text {i}"} for i in range(40)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          batch_size=8, on_error="fail", process=[{"text_length_filter": {"min_len": 1}}])
    (tmp_path / "d.jsonl").write_text((tmp_path / "d.jsonl").read_text() + '{"id": 40, "text": 5}\n')
    assert djx_cli("process", recipe, "--quiet").rc == 1  # stopped at the bad line, its state kept
    res = djx_cli("check", tmp_path / "out" / "o.jsonl")
    assert res.rc == 1 and "the run writing it has not finished" in res.err
    assert "run the same djx process command again to resume it" in res.err


def test_djx_check_of_a_finished_export_beside_an_unfinished_later_run_says_so(tmp_path, write_jsonl, write_recipe,
                                                                               djx_cli):
    """A finished run's export stays whole while a later run of the same command (--restart, or
    grown data) is stopped before its finish: the check passes on those outputs and says that they
    are an earlier run's and that the later run has work to finish."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": f"text {i}"} for i in range(40)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          batch_size=8, on_error="fail", process=[{"text_length_filter": {"min_len": 1}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export = tmp_path / "out" / "o.jsonl"
    finished = djx_cli("check", export)
    assert finished.rc == 0 and "has not finished" not in finished.out, finished.out
    (tmp_path / "d.jsonl").write_text((tmp_path / "d.jsonl").read_text() + '{"id": 40, "text": 5}\n')
    assert djx_cli("process", recipe, "--quiet", "--restart").rc == 1  # stopped at the bad line, its state kept
    assert export.exists()
    res = djx_cli("check", export)
    assert res.rc == 0 and "check passed: 40 input" in res.out, res.out + res.err
    assert "note: a run writing to this export has not finished" in res.out and "an earlier run's" in res.out
