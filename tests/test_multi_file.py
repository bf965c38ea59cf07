"""Datasets of many files: a folder of shards or a glob reads like the shards concatenated, in
sorted order, with per-file line numbers; resume crosses file boundaries; Ray reads them the same."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from djx import DjxError, Pipeline
from djx.core.records import FailFast

from conftest import read_jsonl_file
from helpers import assert_same_run, djx, hold, kill_when, outputs_by_position as ray_outputs

QUIET = {"progress": False, "log": lambda *a: None}


def shard_lines(records: list[dict]) -> list[list[str]]:
    """Three shards of JSON lines, with what real shards hold: a bad line, a blank line."""
    lines = [json.dumps(r) for r in records]
    a, b, c = lines[:10], lines[10:21], lines[21:]
    b.insert(3, '{"text": "cut off')
    b.insert(5, "")
    return [a, b, c]


@pytest.fixture
def shards(tmp_path, mm_records):
    """ds/: part-0.jsonl, part-1.jsonl, sub/part-2.jsonl and files that are not data; flat/: the
    same lines in one file. Each folder has its own images/ (relative paths resolve there)."""
    parts = shard_lines(mm_records)
    ds, flat = tmp_path / "ds", tmp_path / "flat"
    for folder in (ds, flat):
        shutil.copytree(tmp_path / "images", folder / "images")
    (ds / "sub").mkdir()
    for name, lines in zip(["part-0.jsonl", "part-1.jsonl", "sub/part-2.jsonl"], parts):
        (ds / name).write_text("\n".join(lines) + "\n")
    (ds / "README.txt").write_text("not data")
    (ds / ".cache").mkdir()
    (ds / ".cache" / "old.jsonl").write_text(json.dumps({"text": "hidden, never read"}) + "\n")
    (flat / "all.jsonl").write_text("".join("\n".join(lines) + "\n" for lines in parts))
    return ds, flat, parts


def outputs(folder: Path) -> dict:
    """The records of a run's outputs, image paths as the input wrote them (relative to its own
    folder: the outputs write them absolute, and the compared datasets live in different folders),
    without the stats' provenance (which names those files)."""
    return {kind: [_as_input(r) for r in read_jsonl_file(folder / name)] for kind, name in
            (("kept", "kept.jsonl"), ("dropped", "kept.dropped.jsonl"), ("rejected", "kept.rejected.jsonl"))}


def _as_input(rec: dict) -> dict:
    sample = rec.get("record") if isinstance(rec.get("record"), dict) else rec
    # the provenance vouches for these image files (their paths, sizes and mtimes): copies differ
    rec.pop("__djx__stats_provenance__", None)
    if isinstance(sample.get("images"), list):
        sample["images"] = [p[p.rindex("/images/") + 1:] if "/images/" in p else p for p in sample["images"]]
    return rec


def write_parquet_shards(tmp_path, records) -> tuple[Path, list[dict]]:
    """pq/part-{0,1,2}.parquet (with their own images/) holding the records; returns the folder
    and the rows (text made a string: one type per parquet column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    shutil.copytree(tmp_path / "images", tmp_path / "pq" / "images")
    rows = [dict(r, text=str(r["text"])) for r in records]
    for i, part in enumerate((rows[:7], rows[7:20], rows[20:])):
        pq.write_table(pa.Table.from_pylist(part), tmp_path / "pq" / f"part-{i}.parquet")
    return tmp_path / "pq", rows


def run(dataset, export, process, **keys):
    pipe = Pipeline(dataset_path=str(dataset), export_path=str(export), process=process, batch_size=4,
                    np=2, start_method="fork", **keys)
    return pipe.run(**QUIET)


def test_a_folder_of_shards_reads_like_the_shards_concatenated(tmp_path, shards, mm_process):
    ds, flat, parts = shards
    many = run(ds, tmp_path / "out-many/kept.jsonl", mm_process)
    one = run(flat / "all.jsonl", tmp_path / "out-one/kept.jsonl", mm_process)
    assert many["input"] == one["input"] == sum(len([x for x in p if x]) for p in parts)
    assert many["check"]["ok"] and many["blank_lines"] == 1
    got, want = outputs(tmp_path / "out-many"), outputs(tmp_path / "out-one")
    assert got["kept"] == want["kept"] and got["dropped"] == want["dropped"]  # same positions, stats
    # rejected records say which file and which line of it
    assert [r["__dj__pos__"] for r in got["rejected"]] == [r["__dj__pos__"] for r in want["rejected"]]
    bad = [r for r in got["rejected"] if r["code"] == "bad_input" and "raw" in r]
    assert [(r["file"], r["line"]) for r in bad] == [("part-1.jsonl", 4)]
    for r in got["rejected"]:
        k = r["__dj__pos__"]
        file = "part-0.jsonl" if k < 10 else "part-1.jsonl" if k < 22 else "sub/part-2.jsonl"
        assert r["file"] == file
    assert all("file" not in r for r in want["rejected"])  # one file: no file field


def test_a_glob_picks_its_files_and_images_resolve_before_the_wildcard(tmp_path, shards, mm_process):
    ds, _, parts = shards
    summary = run(ds / "part-*.jsonl", tmp_path / "out/kept.jsonl", mm_process)
    assert summary["input"] == len(parts[0]) + len([x for x in parts[1] if x])  # not sub/part-2
    summary = run(ds / "**" / "*.jsonl", tmp_path / "out2/kept.jsonl", mm_process)
    assert summary["input"] == sum(len([x for x in p if x]) for p in parts)
    assert summary["kept"] > 0 and summary["check"]["ok"]


def test_folder_datasets_refuse_what_would_go_wrong(tmp_path, shards, mm_process):
    ds, _, _ = shards
    with pytest.raises(DjxError, match="would be part of the dataset"):
        run(ds, ds / "out" / "kept.jsonl", mm_process)
    with pytest.raises(DjxError, match="would be part of the dataset"):
        run(ds / "*.jsonl", ds / "kept.jsonl", mm_process)
    with pytest.raises(DjxError, match="would be part of the dataset"):
        run(ds / "**" / "*.jsonl", ds / "out" / "kept.jsonl", mm_process)
    # a glob that cannot match the outputs is fine
    assert run(ds / "*.jsonl", ds / "out" / "kept.jsonl", mm_process)["check"]["ok"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DjxError, match="holds no .jsonl, .json or .parquet file"):
        run(tmp_path / "empty", tmp_path / "o/kept.jsonl", mm_process)
    with pytest.raises(DjxError, match="no file matches"):
        run(ds / "nothing-*.jsonl", tmp_path / "o/kept.jsonl", mm_process)
    (ds / "extra.json").write_text("[]")
    with pytest.raises(DjxError, match="mix formats"):
        run(ds, tmp_path / "o/kept.jsonl", mm_process)


def test_a_run_stopped_in_the_second_file_resumes_there(tmp_path, shards, mm_records, mm_process):
    ds, _, _ = shards  # rewritten below without the samples that are rejected anyway
    clean = [r for r in mm_records if r["expect"] != "rejected"]
    for name, lines in zip(["part-0.jsonl", "part-1.jsonl", "sub/part-2.jsonl"], shard_lines(clean)):
        (ds / name).write_text("\n".join(lines) + "\n")
    ref = run(ds, tmp_path / "ref/kept.jsonl", mm_process)
    log = []
    with pytest.raises(FailFast, match=r"part-1\.jsonl, line 4: not valid JSON"):
        Pipeline(dataset_path=str(ds), export_path=str(tmp_path / "out/kept.jsonl"), process=mm_process,
                 batch_size=4, np=1, start_method="fork", on_error="fail").run(progress=False, log=log.append)
    manifest = json.loads((tmp_path / "out/.kept.djx-state/manifest.json").read_text())["read"]
    assert manifest["file"] == 1 and manifest["records"] == 12 and manifest["lines"] == 2
    summary = Pipeline(dataset_path=str(ds), export_path=str(tmp_path / "out/kept.jsonl"), process=mm_process,
                       batch_size=4, np=2, start_method="fork").run(progress=False, log=log.append)
    assert any("resuming: 12 samples already done" in line for line in log)
    assert summary["resumed"] and summary["input"] == ref["input"] and summary["check"]["ok"]
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")


def test_parquet_shards_read_like_one_parquet_file(tmp_path, mm_records, mm_process):
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder, rows = write_parquet_shards(tmp_path, mm_records)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "one.parquet")
    many = run(folder, tmp_path / "out-many/kept.jsonl", mm_process)
    one = run(tmp_path / "one.parquet", tmp_path / "out-one/kept.jsonl", mm_process)
    assert many["input"] == one["input"] == len(rows) and many["check"]["ok"]
    got, want = outputs(tmp_path / "out-many"), outputs(tmp_path / "out-one")
    assert got["kept"] == want["kept"] and got["dropped"] == want["dropped"]


# -- the same on Ray ------------------------------------------------------------------------------


def run_both(dataset, tmp_path, process, address) -> dict:
    """{executor: (summary, outputs by position)} for the local and the Ray executor."""
    both = {}
    for executor in ("local", "ray"):
        summary = Pipeline(dataset_path=str(dataset), export_path=str(tmp_path / executor / "kept.jsonl"),
                           process=process, batch_size=4, np=2, start_method="fork", executor=executor,
                           ray_address=address).run(**QUIET)
        both[executor] = (summary, ray_outputs(tmp_path / executor))
    return both


def test_ray_reads_a_folder_of_shards_like_the_local_executor(ray_address, tmp_path, shards, mm_process):
    ds, _, _ = shards
    both = run_both(ds, tmp_path, mm_process, ray_address)
    assert_same_run(both)  # same records, stats, files and lines of rejected samples
    assert {r["file"] for r in both["ray"][1]["rejected"].values()} == \
        {"part-0.jsonl", "part-1.jsonl", "sub/part-2.jsonl"}


def test_ray_reads_parquet_shards_like_the_local_executor(ray_address, tmp_path, mm_records, mm_process):
    folder, _ = write_parquet_shards(tmp_path, mm_records)
    assert_same_run(run_both(folder, tmp_path, mm_process, ray_address))


def test_a_killed_ray_run_over_shards_resumes_in_the_right_file(ray_address, tmp_path):
    import yaml
    from conftest import PLUGINS_DIR
    n, per = 300, 100
    for folder in ("ref", "run"):
        (tmp_path / folder / "ds").mkdir(parents=True)
        for k in range(n // per):
            (tmp_path / folder / "ds" / f"part-{k}.jsonl").write_text(
                "".join(json.dumps({"id": i, "text": f"sample number {i:04d}"}) + "\n"
                        for i in range(k * per, (k + 1) * per)))
    recipe = {"dataset_path": "ds", "export_path": "out/o.jsonl", "np": 2, "batch_size": 8,
              "checkpoint_every": 2, "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")],
              "process": [{"hold_mapper": {"hold_file": str(tmp_path / "run" / "hold")}},
                          {"text_length_filter": {"min_len": 5}}, {"slow_filter": {"seconds": 0}}]}
    (tmp_path / "ref" / "r.yaml").write_text(yaml.safe_dump({**recipe, "start_method": "fork"}))
    assert djx("process", str(tmp_path / "ref" / "r.yaml"), "--quiet").wait() == 0
    (tmp_path / "run" / "r.yaml").write_text(yaml.safe_dump({**recipe, "executor": "ray",
                                                             "ray_address": ray_address}))
    # Ray hands a block's rows on when its task ends (a block is one file here): files 0 and 1 can
    # finish, file 2 is held until the test has killed the run
    hold(tmp_path / "run", 200)
    proc = djx("process", str(tmp_path / "run" / "r.yaml"), "--quiet", start_new_session=True)
    kill_when(tmp_path / "run", proc, 120)  # past the first file
    state = json.loads((tmp_path / "run/out/.o.djx-state/manifest.json").read_text())["read"]
    assert state["file"] >= 1 and 120 <= state["records"] < n
    final = djx("process", str(tmp_path / "run" / "r.yaml"), "--quiet")
    out, err = final.communicate()
    assert final.returncode == 0, err
    assert f"resuming: {state['records']} samples already done" in out + err
    for name in ("o.jsonl", "o.dropped.jsonl"):
        assert read_jsonl_file(tmp_path / "run/out" / name) == read_jsonl_file(tmp_path / "ref/out" / name)
