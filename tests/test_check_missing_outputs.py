"""`djx check` fails an export whose dropped or rejected file, written by the run, is missing, and
names it; an export made with export_dropped: false still passes on its summary's dropped count."""
from __future__ import annotations


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
