"""A parquet dataset's binary (Hugging Face's Image struct), timestamp and decimal columns through a
whole run: kept by a .parquet export, with the samples' stats signed and reused by the next run; a
.jsonl export refused before any work, naming the column (audit D3)."""
from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pyarrow.parquet as pq

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
IMG = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _dataset(path):
    pq.write_table(pa.table({
        "text": ["an hf style image struct sample", "a second sample with some words"],
        "image": pa.array([{"bytes": PNG, "path": "a.png"}, {"bytes": PNG, "path": "b.png"}], IMG),
        "raw": pa.array([b"\x00\xff", b"ab"], pa.large_binary()),
        "n": pa.array([1, 2], pa.int32()),
        "ts": pa.array([datetime.datetime(2020, 1, 1, 12, 30)] * 2, pa.timestamp("ms")),
        "dec": pa.array([decimal.Decimal("1.10")] * 2, pa.decimal128(5, 2))}), path)
    return path


def _recipe(tmp_path, write_recipe, dataset, export):
    return write_recipe(tmp_path / f"{export.replace('/', '_')}.yaml", dataset_path=str(dataset), export_path=export,
                        np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 5}}])


def test_a_parquet_export_keeps_binary_timestamp_and_decimal_values_and_signs_the_stats(
        tmp_path, write_recipe, djx_cli):
    data = _dataset(tmp_path / "in.parquet")
    out = tmp_path / "out" / "kept.parquet"
    assert djx_cli("process", _recipe(tmp_path, write_recipe, data, str(out)), "--quiet").rc == 0
    table = pq.read_table(out)
    types = {f.name: f.type for f in table.schema}  # each the input's own, not what the values infer
    assert types["image"] == IMG and types["raw"] == pa.large_binary() and types["n"] == pa.int32()
    assert types["ts"] == pa.timestamp("ms") and types["dec"] == pa.decimal128(5, 2)
    rows = table.to_pylist()
    assert rows[0]["raw"] == b"\x00\xff" and rows[0]["image"]["bytes"] == PNG
    assert rows[0]["dec"] == decimal.Decimal("1.10") and rows[0]["ts"] == datetime.datetime(2020, 1, 1, 12, 30)
    assert all(r["__djx__stats_provenance__"] for r in rows)
    again = tmp_path / "again" / "kept.parquet"
    assert djx_cli("process", _recipe(tmp_path, write_recipe, out, str(again)), "--quiet").rc == 0
    summary = json.loads((tmp_path / "again" / "kept.summary.json").read_text())
    assert [op["reused_stats"] for op in summary["ops"]] == [2]


def test_a_jsonl_export_of_a_binary_column_is_refused_before_any_work(tmp_path, write_recipe, djx_cli):
    data = _dataset(tmp_path / "in.parquet")
    result = djx_cli("process", _recipe(tmp_path, write_recipe, data, str(tmp_path / "out" / "kept.jsonl")), "--quiet")
    assert result.rc != 0 and "column 'image'" in result.err and ".parquet" in result.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()


def test_records_with_different_keys_keep_their_signatures_through_a_parquet_export(
        tmp_path, write_recipe, djx_cli):
    """A parquet export holds every record's columns: a record read back carries a null for each
    key (and struct field) it lacked. Its stats signature holds all the same: the next run reuses
    every stat and `djx check` has nothing to note."""
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"text": "a first sample with words", "meta": {"a": 1}},
        {"text": "a second sample with words", "url": "http://example.com/2", "meta": {"b": "x"}},
        {"text": "a third sample", "v": float("nan")}]))
    out = tmp_path / "out" / "kept.parquet"
    assert djx_cli("process", _recipe(tmp_path, write_recipe, data, str(out)), "--quiet").rc == 0
    rows = pq.read_table(out).to_pylist()
    assert rows[0]["url"] is None and rows[0]["meta"] == {"a": 1, "b": None}  # what parquet gives back
    check = djx_cli("check", str(out))
    assert check.rc == 0 and "check passed" in check.out and "vouch" not in check.out, check.out
    again = tmp_path / "again" / "kept.parquet"
    assert djx_cli("process", _recipe(tmp_path, write_recipe, out, str(again)), "--quiet").rc == 0
    summary = json.loads((tmp_path / "again" / "kept.summary.json").read_text())
    assert [op["reused_stats"] for op in summary["ops"]] == [3] and "foreign_stats_dropped" not in summary["events"], summary
