"""Values JSON cannot hold (bytes, timestamps, decimals from parquet) survive the part files and a
parquet export; a JSON export is refused for such parquet columns before any work, and writes such
a value a plug-in put into a sample in djx's lossless form, never as its repr (audit D3)."""
from __future__ import annotations

import datetime
import decimal
import json
import zoneinfo

import pyarrow as pa
import pyarrow.parquet as pq

from djx.core.io import writers

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
VALUES = {"raw": b"\x00\xff", "image": {"bytes": PNG, "path": "a.png"},
          "ts": datetime.datetime(2020, 1, 1, 12, 30, 0, 5),
          "ts_utc": datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
          "ts_paris": datetime.datetime(2020, 6, 1, 8, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
          "day": datetime.date(2020, 2, 29), "clock": datetime.time(23, 59, 1, 7),
          "wait": datetime.timedelta(days=2, microseconds=3), "dec": decimal.Decimal("1.10"),
          "list": [b"a", decimal.Decimal("-0.5")]}


def _part(tmp_path, records):
    part = tmp_path / "part.jsonl"
    part.write_bytes(b"".join(writers.encode_line(r) for r in records))
    return str(part)


def test_part_files_keep_bytes_timestamps_and_decimals_exactly(tmp_path):
    back = list(writers.read_part(_part(tmp_path, [dict(VALUES, text="x")])))
    assert back == [dict(VALUES, text="x")]
    assert str(back[0]["ts_paris"].tzinfo) == "Europe/Paris" and str(back[0]["dec"]) == "1.10"


def test_a_parquet_export_has_binary_timestamp_and_decimal_columns(tmp_path):
    part = _part(tmp_path, [dict(VALUES, text="x"), dict(VALUES, text="y", raw=None)])
    dest = str(tmp_path / "out.parquet")
    writers.write_part(part, [dest], ".parquet")
    schema = pq.read_schema(dest)
    assert schema.field("raw").type == pa.binary()
    assert schema.field("image").type == pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    assert schema.field("ts").type == pa.timestamp("us")
    assert schema.field("ts_paris").type == pa.timestamp("us", tz="Europe/Paris")
    assert schema.field("day").type == pa.date32() and schema.field("clock").type == pa.time64("us")
    assert schema.field("wait").type == pa.duration("us") and pa.types.is_decimal(schema.field("dec").type)
    rows = pq.read_table(dest).to_pylist()
    assert rows[0]["image"]["bytes"] == PNG and rows[0]["raw"] == b"\x00\xff" and rows[1]["raw"] is None
    assert rows[0]["dec"] == decimal.Decimal("1.10") and rows[0]["ts"] == VALUES["ts"]


def test_a_json_export_writes_a_plugins_bytes_in_the_lossless_form_not_their_repr(tmp_path):
    part = _part(tmp_path, [{"text": "x", "raw": b"\x00\xff", "dec": decimal.Decimal("1.10")}])
    writers.write_part(part, [str(tmp_path / "out.jsonl")], ".jsonl")
    writers.write_part(part, [str(tmp_path / "out.json")], ".json")
    line = json.loads((tmp_path / "out.jsonl").read_text())
    assert line == json.loads((tmp_path / "out.json").read_text())[0]
    assert line["raw"] == {"__djx__value_binary__": "AP8="} and line["dec"] == {"__djx__value_decimal__": "1.10"}


def test_a_parquet_input_with_binary_columns_is_named_before_a_json_export(tmp_path):
    from djx.core.io.parquet_reader import json_export_problem
    img = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(pa.table({"text": ["a"], "image": pa.array([{"bytes": PNG, "path": "a"}], img)}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"text": ["a"], "n": [1], "tags": [["x"]]}), tmp_path / "plain.parquet")
    assert "column 'image'" in json_export_problem([str(tmp_path / "a.parquet")])
    assert json_export_problem([str(tmp_path / "plain.parquet")]) is None


def test_samples_with_bytes_are_signed(tmp_path):
    from djx.core.run.provenance import _mac
    prov = {"stats": {"text_len": "f"}, "images": None}
    assert _mac(b"key", {"text": "x", "raw": b"\x00", "dec": decimal.Decimal("1.1")}, prov)


def test_nanosecond_timestamps_stay_nanosecond_in_a_parquet_export(tmp_path):
    ns = pa.array([1577881800000000001], pa.timestamp("ns", tz="UTC")).to_pylist()  # pandas Timestamps
    dest = str(tmp_path / "out.parquet")
    writers.write_part(_part(tmp_path, [{"text": "x", "t": ns[0]}]), [dest], ".parquet")
    column = pq.read_table(dest).column("t")
    assert column.type == pa.timestamp("ns", tz="UTC") and column.cast(pa.int64()).to_pylist() == [1577881800000000001]


def test_given_the_input_files_a_parquet_export_keeps_their_exact_column_types(tmp_path):
    img = pa.struct([("bytes", pa.large_binary()), ("path", pa.string())])
    schema = pa.schema([("text", pa.large_string()), ("n", pa.int32()), ("dec", pa.decimal128(5, 2)),
                        ("ts", pa.timestamp("ms")), ("image", img), ("wide", pa.decimal128(5, 2)),
                        ("changed", pa.int32()), ("empty", pa.date32())])
    source = pa.table({"text": ["x"], "n": [7], "dec": [decimal.Decimal("1.10")],
                       "ts": [datetime.datetime(2020, 1, 1, 0, 0, 1)], "image": [{"bytes": PNG, "path": "a"}],
                       "wide": [decimal.Decimal("1.00")], "changed": [1], "empty": [None]}, schema=schema)
    pq.write_table(source, tmp_path / "in.parquet")
    rows = source.to_pylist()
    rows[0].update(wide=decimal.Decimal("123456.7"), changed="now text")  # values an op changed
    dest = str(tmp_path / "out.parquet")
    writers.write_part(_part(tmp_path, rows), [dest], ".parquet", like=[str(tmp_path / "in.parquet")])
    out = pq.read_schema(dest)
    for name in ("text", "n", "dec", "ts", "image", "empty"):
        assert out.field(name).type == schema.field(name).type, name
    assert out.field("wide").type == pa.decimal128(7, 1) and out.field("changed").type == pa.string()
    assert pq.read_table(dest).to_pylist() == rows
