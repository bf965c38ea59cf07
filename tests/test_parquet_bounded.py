"""Parquet rows are read in reads bounded by max_batch_bytes, as JSON Lines lines are: a small zstd
file that decodes to hundreds of MB costs the main process about a batch, not the whole file, and
gives the same outputs as the same records written as JSON Lines."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

MiB = 1 << 20
SIZES = (MiB, MiB // 2, MiB // 4)  # bytes of text per row, in turn
ROWS = 192                         # ~112 MiB of text once decoded; the zstd file is a few KB


def rows(n: int = ROWS) -> list[dict]:
    return [{"id": i, "text": f"{i:05d} " + "ab" * (SIZES[i % len(SIZES)] // 2)} for i in range(n)]


def write_parquet(path, records) -> str:
    """zstd, a data page per row or so (pyarrow's default writes 1,024 values before it checks a page's
    size, and a reader must decompress a whole page to take one row of it)."""
    pq.write_table(pa.Table.from_pylist(records), path, compression="zstd", write_batch_size=1)
    return str(path)


def write_jsonl(path, records) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return str(path)


def recipe(tmp_path, data: str, out: str, **keys) -> str:
    """A recipe file (JSON is YAML) that keeps texts up to 600,000 characters, in 2 MiB batches."""
    path = tmp_path / f"{out}.yaml"
    path.write_text(json.dumps({"dataset_path": data, "export_path": str(tmp_path / out / "o.jsonl"), "np": 1,
                                "max_batch_bytes": 2 * MiB,
                                "process": [{"text_length_filter": {"min_len": 1, "max_len": 600_000}}], **keys}))
    return str(path)


# The run happens in a child process whose own thread samples its USS: the main process's memory
# while it reads, with a one-row warm-up run first so that imports are not counted.
MEASURE = """
import json, sys, threading, psutil
from djx import Pipeline
quiet = {"progress": False, "log": lambda *a, **k: None}
Pipeline.from_recipe(sys.argv[1]).run(**quiet)
me, peak, done = psutil.Process(), [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], me.memory_full_info().uss)
        done.wait(0.005)
base = me.memory_full_info().uss
t = threading.Thread(target=sample); t.start()
try:
    Pipeline.from_recipe(sys.argv[2]).run(**quiet)
finally:
    done.set(); t.join()
print(json.dumps({"extra_uss": peak[0] - base}))
"""


def run_measured(tmp_path, run: str) -> int:
    warm = recipe(tmp_path, write_parquet(tmp_path / "warm.parquet", rows(1)), "warm")
    proc = subprocess.run([sys.executable, "-c", MEASURE, warm, run],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["extra_uss"]


def outputs(folder) -> dict:
    out = {}
    for kind, name in (("kept", "o.jsonl"), ("dropped", "o.dropped.jsonl"), ("rejected", "o.rejected.jsonl")):
        path = folder / name
        out[kind] = [json.loads(line) for line in open(path, encoding="utf-8")] if path.exists() else []
    return out


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_a_small_zstd_parquet_of_large_rows_costs_the_reader_about_a_batch(tmp_path):
    records = rows()
    data = write_parquet(tmp_path / "d.parquet", records)
    decoded = sum(len(r["text"]) for r in records)
    extra = run_measured(tmp_path, recipe(tmp_path, data, "pq"))
    # materialising the rows costs ~2x `decoded` (Arrow + Python); a batch is 2 MiB
    assert extra < 48 * MiB, f"the main process grew {extra / MiB:.0f} MiB reading {decoded / MiB:.0f} MiB of rows"
    got = outputs(tmp_path / "pq")
    n = {kind: len(v) for kind, v in got.items()}
    assert n["kept"] + n["dropped"] + n["rejected"] == ROWS, n
    assert sorted(r["id"] for r in got["kept"]) == [r["id"] for r in records if len(r["text"]) <= 600_000]


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_parquet_rows_give_the_outputs_the_same_records_give_as_json_lines(tmp_path):
    records = rows(48)
    from djx import Pipeline
    quiet = {"progress": False, "log": lambda *a, **k: None}
    Pipeline.from_recipe(recipe(tmp_path, write_parquet(tmp_path / "d.parquet", records), "pq")).run(**quiet)
    Pipeline.from_recipe(recipe(tmp_path, write_jsonl(tmp_path / "d.jsonl", records), "jl")).run(**quiet)
    pq_out, jl_out = outputs(tmp_path / "pq"), outputs(tmp_path / "jl")
    for kind in pq_out:
        assert [r.get("text", r.get("record")) for r in pq_out[kind]] == \
               [r.get("text", r.get("record")) for r in jl_out[kind]], kind
    assert len(pq_out["kept"]) == 32 and len(pq_out["dropped"]) == 16


def test_a_row_over_max_record_bytes_is_rejected_with_its_size_as_the_same_json_line_is(tmp_path):
    """Rows of 1 MiB over a 768 KiB limit: rejected as bad_input naming their size and the limit, in
    parquet as in JSON Lines; the rest of the run goes on."""
    records = rows(24)
    from djx import Pipeline
    quiet = {"progress": False, "log": lambda *a, **k: None}
    for name, data in (("pq", write_parquet(tmp_path / "d.parquet", records)),
                       ("jl", write_jsonl(tmp_path / "d.jsonl", records))):
        Pipeline.from_recipe(recipe(tmp_path, data, name, max_record_bytes=768 << 10)).run(**quiet)
    pq_out, jl_out = outputs(tmp_path / "pq"), outputs(tmp_path / "jl")
    big = [r["id"] for r in records if len(r["text"]) > 768 << 10]
    for out in (pq_out, jl_out):
        assert [r["__dj__pos__"] for r in out["rejected"]] == big and len(big) == 8
        for r in out["rejected"]:
            assert r["code"] == "bad_input" and "over max_record_bytes (786,432)" in r["reason"], r["reason"]
            assert f"{len(records[r['__dj__pos__']]['text']):,}"[:5] in r["reason"]  # its size, give or take framing
        assert sorted(r["id"] for r in out["kept"] + out["dropped"]) == [r["id"] for r in records if r["id"] not in big]
    assert [r["text"] for r in pq_out["kept"]] == [r["text"] for r in jl_out["kept"]]
