"""Reading datasets: JSON Lines, JSON arrays and parquet give the same results; bad lines are
rejected with their line number and reason, blank lines are skipped and counted."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from djx import POSITION_KEY, Pipeline


def run(tmp_path, write_recipe, dataset: str, name: str, process=None, **keys) -> dict:
    recipe = write_recipe(tmp_path / f"{name}.yaml", dataset_path=dataset,
                          export_path=f"{name}/kept.jsonl", np=2, start_method="fork", batch_size=3,
                          process=process or [{"text_length_filter": {"min_len": 5}}], **keys)
    return Pipeline.from_recipe(str(recipe)).run(progress=False)


def outputs(tmp_path, read_jsonl, name: str) -> dict[str, list]:
    folder = tmp_path / name
    return {"kept": read_jsonl(folder / "kept.jsonl"),
            "dropped": read_jsonl(folder / "kept.dropped.jsonl"),
            "rejected": read_jsonl(folder / "kept.rejected.jsonl")}


@pytest.mark.slow
def test_json_array_and_parquet_give_the_same_outputs_as_json_lines(tmp_path, mm_records, mm_process,
                                                                    write_jsonl, write_recipe,
                                                                    read_jsonl):
    records = [r for r in mm_records if isinstance(r["text"], str)]  # parquet needs one schema
    write_jsonl(tmp_path / "d.jsonl", records)
    (tmp_path / "d.json").write_text(json.dumps(records, indent=1))
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "d.parquet")
    results = {}
    for fmt in ("jsonl", "json", "parquet"):
        summary = run(tmp_path, write_recipe, f"d.{fmt}", fmt, process=mm_process)
        assert summary["input"] == len(records)
        results[fmt] = outputs(tmp_path, read_jsonl, fmt)
    assert results["jsonl"]["kept"] and results["jsonl"]["dropped"] and results["jsonl"]["rejected"]
    for fmt in ("json", "parquet"):
        assert results[fmt]["kept"] == results["jsonl"]["kept"], fmt
        assert results[fmt]["dropped"] == results["jsonl"]["dropped"], fmt
        strip = lambda rs: [{k: v for k, v in r.items() if k != "line"} for r in rs]  # noqa: E731
        assert strip(results[fmt]["rejected"]) == strip(results["jsonl"]["rejected"]), fmt


def test_blank_lines_are_skipped_and_counted(tmp_path, write_recipe, read_jsonl):
    lines = ['{"id": 0, "text": "first sample"}', "", "   ", '{"id": 1, "text": "second sample"}',
             "", '{"id": 2, "text": "tiny"}', ""]
    (tmp_path / "d.jsonl").write_text("\r\n".join(lines) + "\n")
    summary = run(tmp_path, write_recipe, "d.jsonl", "out")
    assert summary["blank_lines"] == 4
    assert (summary["input"], summary["kept"], summary["dropped"]) == (3, 2, 1)
    out = outputs(tmp_path, read_jsonl, "out")
    assert [(s["id"], s[POSITION_KEY]) for s in out["kept"] + out["dropped"]] == [(0, 0), (1, 1), (2, 2)]


def test_bad_lines_are_rejected_with_line_number_and_reason(tmp_path, write_recipe, read_jsonl):
    lines = ['{"id": 0, "text": "a good sample"}',
             "",
             '{"id": 1, "text": "truncated',
             '[1, 2]',
             '"just a string"',
             '{"id": 2, "text": "another good sample"}',
             "42"]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    summary = run(tmp_path, write_recipe, "d.jsonl", "out")
    assert (summary["input"], summary["kept"], summary["rejected"]) == (6, 2, 4)
    rejected = {r["line"]: r for r in outputs(tmp_path, read_jsonl, "out")["rejected"]}
    assert sorted(rejected) == [3, 4, 5, 7]
    assert "not valid JSON" in rejected[3]["reason"]
    assert rejected[3]["raw"] == '{"id": 1, "text": "truncated'
    assert "not a JSON object (got list)" in rejected[4]["reason"] and rejected[4]["record"] == [1, 2]
    assert "not a JSON object (got str)" in rejected[5]["reason"]
    assert "not a JSON object (got int)" in rejected[7]["reason"]
    assert [rejected[n][POSITION_KEY] for n in (3, 4, 5, 7)] == [1, 2, 3, 5]


def test_a_null_line_is_rejected_as_not_an_object(tmp_path, write_recipe, read_jsonl):
    """`null` is valid JSON; the reason must not send the user hunting for a syntax error."""
    (tmp_path / "d.jsonl").write_text('{"text": "a good sample"}\nnull\n')
    summary = run(tmp_path, write_recipe, "d.jsonl", "out")
    assert (summary["input"], summary["kept"], summary["rejected"]) == (2, 1, 1)
    (rejected,) = outputs(tmp_path, read_jsonl, "out")["rejected"]
    assert rejected["line"] == 2
    assert "not a JSON object" in rejected["reason"]


def test_records_without_the_text_key_are_rejected_by_the_op_that_needs_it(tmp_path, write_jsonl,
                                                                           write_recipe, read_jsonl):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "long enough"}, {"caption": "no text key"},
                                       {"text": ["not", "a", "string"]}])
    summary = run(tmp_path, write_recipe, "d.jsonl", "out")
    assert (summary["kept"], summary["rejected"]) == (1, 2)
    rejected = outputs(tmp_path, read_jsonl, "out")["rejected"]
    assert [r["op"] for r in rejected] == ["text_length_filter", "text_length_filter"]
    assert "missing text key 'text'" in rejected[0]["reason"]
    assert rejected[0]["record"] == {"caption": "no text key"}
    assert "not a string" in rejected[1]["reason"]


def test_json_array_elements_that_are_not_objects_are_rejected(tmp_path, write_recipe, read_jsonl):
    (tmp_path / "d.json").write_text('[{"text": "a good sample"}, 7, {"text": "tiny"}]')
    summary = run(tmp_path, write_recipe, "d.json", "out")
    assert (summary["input"], summary["kept"], summary["dropped"], summary["rejected"]) == (3, 1, 1, 1)
    (rejected,) = outputs(tmp_path, read_jsonl, "out")["rejected"]
    assert rejected[POSITION_KEY] == 1 and "not a JSON object (got int)" in rejected["reason"]


def test_an_empty_input_gives_empty_outputs_and_succeeds(tmp_path, write_recipe, djx_cli):
    (tmp_path / "d.jsonl").write_text("")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="fork", process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert (summary["input"], summary["kept"], summary["dropped"], summary["rejected"]) == (0, 0, 0, 0)
    for name in ("kept.jsonl", "kept.dropped.jsonl", "kept.rejected.jsonl"):
        assert (tmp_path / "out" / name).read_text() == ""


def test_an_empty_json_array_gives_zero_counts(tmp_path, write_recipe):
    (tmp_path / "d.json").write_text("[]\n")
    summary = run(tmp_path, write_recipe, "d.json", "out")
    assert (summary["input"], summary["kept"], summary["rejected"]) == (0, 0, 0)
    assert summary["check"]["ok"]


def test_a_missing_dataset_is_an_error_naming_the_path(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="nope.jsonl", export_path="out/k.jsonl")
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1
    assert str(tmp_path / "nope.jsonl") in res.err
    assert not (tmp_path / "out" / "k.jsonl").exists()
