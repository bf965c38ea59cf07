"""Parquet files djx did not write: metadata that is not what djx writes is a one-line error, and a
JSON-text column nested deeper than a JSON Lines record may be rejects that row alone."""
from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def parquet_with(path, rows, json_columns_meta: bytes | None):
    table = pa.Table.from_pylist(rows)
    if json_columns_meta is not None:
        table = table.replace_schema_metadata({b"djx.json_columns": json_columns_meta})
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("meta", [b"5", b"null", b'"meta"', b'{"a": 1}', b"[1, 2]", b"not json"])
def test_json_columns_metadata_that_is_not_a_list_of_names_is_one_clear_line(tmp_path, write_recipe, djx_cli, meta):
    data = parquet_with(tmp_path / "d.parquet", [{"text": "a text long enough"}], meta)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 1}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "Traceback" not in res.err
    assert res.err.startswith("djx: error: ") and "djx.json_columns must be a list of column names" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_a_json_column_nested_too_deep_rejects_its_row_and_the_run_goes_on(tmp_path, write_recipe, djx_cli,
                                                                             read_jsonl):
    deep = "[" * 5000 + "]" * 5000
    rows = [{"text": "first text long enough", "meta": json.dumps({"a": 1})},
            {"text": "second text long enough", "meta": deep},
            {"text": "third text long enough", "meta": "[[1]]"}]
    data = parquet_with(tmp_path / "d.parquet", rows, b'["meta"]')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 1}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    kept = read_jsonl(tmp_path / "out" / "o.jsonl")
    assert [k["text"] for k in kept] == ["first text long enough", "third text long enough"]
    assert kept[0]["meta"] == {"a": 1}
    rejected = read_jsonl(tmp_path / "out" / "o.rejected.jsonl")
    assert rejected[0]["code"] == "bad_input" and "nested deeper than 100" in rejected[0]["reason"]
