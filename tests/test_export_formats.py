"""Data-Juicer's output keys: the export's format from its suffix (.jsonl, .json, .parquet),
`keep_stats_in_res_ds: false` (stats in <stem>_stats.jsonl), `export_shard_size` (Data-Juicer's
shard names), all checked by `djx check` and crash-safe like the JSON Lines export."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from djx.core.io import writers
from djx.core.io.output_reader import iter_output

STATS, POS = "__dj__stats__", "__dj__pos__"


def _records(path) -> list[dict]:
    return [r for _, r in iter_output(str(path))]


def _recipe(tmp_path, write_recipe, dataset, export, **keys):
    return write_recipe(tmp_path / "r.yaml", dataset_path=str(dataset), export_path=export, np=1,
                        start_method="fork", process=[{"text_length_filter": {"min_len": 4}}], **keys)


def test_parquet_export_in_shards_with_a_stats_file_passes_djx_check(tmp_path, text_dataset, write_recipe,
                                                                     djx_cli, read_jsonl):
    recipe = _recipe(tmp_path, write_recipe, text_dataset.path, "out/kept.parquet",
                     keep_stats_in_res_ds=False, export_shard_size=600)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    out = tmp_path / "out"
    shards = sorted(p.name for p in out.glob("kept-*.parquet"))
    n = len(shards)
    assert n > 1 and shards == [f"kept-{i:0{len(str(n)) + 1}d}-of-{n:0{len(str(n)) + 1}d}.parquet" for i in range(n)]
    assert not (out / "kept.parquet").exists()
    rows = [r for s in shards for r in pq.read_table(out / s).to_pylist()]
    assert [r["id"] for r in rows] == text_dataset.kept_ids(4)
    assert all(STATS not in r for r in rows)  # Data-Juicer's keep_stats_in_res_ds: false
    stats = read_jsonl(out / "kept_stats.jsonl")
    # the export is training-ready (the input's keys only): djx's keys are in the stats rows, in export order
    assert all(not k.startswith("__dj") for r in rows for k in r)
    assert len(stats) == len(rows) and [s[POS] for s in stats] == sorted(s[POS] for s in stats)
    assert all(s[STATS]["text_len"] == len(r["text"]) for s, r in zip(stats, rows))
    assert (out / "kept.dropped.parquet").exists() and (out / "kept.rejected.parquet").exists()
    summary = json.loads((out / "kept.summary.json").read_text())
    assert [os.path.basename(f) for f in summary["outputs"]["export_files"]] == shards
    assert summary["outputs"]["stats"].endswith("kept_stats.jsonl")

    check = djx_cli("check", out / "kept.parquet", "--recipe", recipe)
    assert check.rc == 0, check.out + check.err
    # a stats file that does not belong to the export fails the check, naming the file
    (out / "kept_stats.jsonl").write_text("".join(json.dumps(s) + "\n" for s in stats[1:]))
    check = djx_cli("check", out / "kept.parquet", "--recipe", recipe)
    assert check.rc == 1 and "kept_stats.jsonl" in check.out + check.err


def test_json_export_is_one_array_equal_to_the_jsonl_export(tmp_path, text_dataset, write_recipe, djx_cli,
                                                            read_jsonl):
    jsonl = _recipe(tmp_path / "a", write_recipe, text_dataset.path, "out/kept.jsonl")
    as_json = _recipe(tmp_path / "b", write_recipe, text_dataset.path, "out/kept.json")
    assert djx_cli("process", jsonl, "--quiet").rc == 0
    assert djx_cli("process", as_json, "--quiet").rc == 0
    for suffix in ("", ".dropped", ".rejected"):
        array = json.loads((tmp_path / "b" / "out" / f"kept{suffix}.json").read_text())
        assert array == read_jsonl(tmp_path / "a" / "out" / f"kept{suffix}.jsonl")
    assert djx_cli("check", tmp_path / "b" / "out" / "kept.json", "--recipe", as_json).rc == 0


def test_parquet_keeps_fields_whose_types_differ_between_records(tmp_path, write_jsonl, write_recipe, djx_cli):
    records = [{"id": i, "text": "long enough", "meta": [1, 2] if i % 2 else "a string",
                "tags": {"a": i} if i < 3 else {"b": "x"}, "empty": {}, "nested": {"x": {}}} for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    recipe = _recipe(tmp_path, write_recipe, data, "out/kept.parquet")
    assert djx_cli("process", recipe, "--quiet").rc == 0
    back = _records(tmp_path / "out" / "kept.parquet")
    assert [r["meta"] for r in back] == [r["meta"] for r in records]
    assert all(r["empty"] == {} and r["nested"] == {"x": {}} for r in back)  # parquet has no empty struct
    assert [r["id"] for r in back] == list(range(6))
    assert djx_cli("check", tmp_path / "out" / "kept.parquet", "--recipe", recipe).rc == 0


def test_a_finish_stopped_between_two_shards_is_completed_by_the_next_run(tmp_path, text_dataset, write_recipe,
                                                                          djx_cli, monkeypatch):
    recipe = _recipe(tmp_path, write_recipe, text_dataset.path, "out/kept.parquet", export_shard_size=300)
    reference = _recipe(tmp_path / "ref", write_recipe, text_dataset.path, "out/kept.parquet", export_shard_size=300)
    assert djx_cli("process", reference, "--quiet").rc == 0
    real, written = writers.write_records, []

    def crash_after_first_shard(records, dest, fmt):
        if written:
            raise KeyboardInterrupt  # the process stopped here
        real(records, dest, fmt)
        written.append(dest)

    monkeypatch.setattr(writers, "write_records", crash_after_first_shard)
    assert djx_cli("process", recipe, "--quiet").rc == 130
    monkeypatch.setattr(writers, "write_records", real)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    assert "completed that" in res.out
    names = sorted(p.name for p in (tmp_path / "out").glob("kept-*"))
    assert names == sorted(p.name for p in (tmp_path / "ref" / "out").glob("kept-*"))
    assert _records(tmp_path / "out" / "kept.parquet") == _records(tmp_path / "ref" / "out" / "kept.parquet")
    assert djx_cli("check", tmp_path / "out" / "kept.parquet", "--recipe", recipe).rc == 0


def _run(recipe, cwd):
    return subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_parquet_export_killed_mid_run_resumes_to_the_same_outputs(tmp_path, write_jsonl, write_recipe):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 9)} for i in range(4000)])
    keys = dict(batch_size=10, checkpoint_every=1, keep_stats_in_res_ds=False)
    recipe = _recipe(tmp_path / "run", write_recipe, data, "out/kept.parquet", **keys)
    reference = _recipe(tmp_path / "ref", write_recipe, data, "out/kept.parquet", **keys)
    assert _run(reference, tmp_path).wait(timeout=120) == 0
    proc = _run(recipe, tmp_path)
    manifest = tmp_path / "run" / "out" / ".kept.djx-state" / "manifest.json"
    while proc.poll() is None and not manifest.exists():
        pass  # wait for the first checkpoint: the run is mid-way
    assert proc.poll() is None, "the run ended before its first checkpoint was seen"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    again = _run(recipe, tmp_path)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "resuming" in out
    for name in ("kept.parquet", "kept.dropped.parquet", "kept.rejected.parquet"):
        assert _records(tmp_path / "run" / "out" / name) == _records(tmp_path / "ref" / "out" / name), name
    assert (tmp_path / "run" / "out" / "kept_stats.jsonl").read_bytes() == \
        (tmp_path / "ref" / "out" / "kept_stats.jsonl").read_bytes()


def test_a_rerun_with_other_shards_leaves_no_stale_shard_or_stats_file(tmp_path, text_dataset, write_recipe,
                                                                       djx_cli):
    first = _recipe(tmp_path, write_recipe, text_dataset.path, "out/kept.jsonl", export_shard_size=200,
                    keep_stats_in_res_ds=False)
    assert djx_cli("process", first, "--quiet").rc == 0
    assert len(list((tmp_path / "out").glob("kept-*.jsonl"))) > 2
    second = _recipe(tmp_path, write_recipe, text_dataset.path, "out/kept.jsonl")
    assert djx_cli("process", second, "--quiet", "--restart").rc == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "kept.dropped.jsonl", "kept.jsonl", "kept.rejected.jsonl", "kept.summary.json"]


@pytest.mark.parametrize("path", ["0.5 a.jsonl 0.5 b.jsonl", "a.jsonl b.jsonl"])
def test_a_mixture_dataset_path_is_refused_with_what_to_do(tmp_path, write_recipe, djx_cli, path):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=path, export_path="out/k.jsonl",
                          process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe)
    assert res.rc == 1 and "Traceback" not in res.err
    assert "mixture" in res.err and "glob" in res.err


def test_chained_runs_keep_the_first_runs_position_and_parquet_fields(tmp_path, write_jsonl, write_recipe, djx_cli,
                                                                     read_jsonl):
    texts = ["ab", "abcd", "abcdefg", "abcde", "abcdefgh", "a", "abcdef"]
    records = [{"id": i, "text": t, "meta": [i] if i % 2 else f"m{i}"} for i, t in enumerate(texts)]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    first = write_recipe(tmp_path / "one.yaml", dataset_path=str(data), export_path="one/kept.parquet", np=1,
                         start_method="fork", process=[{"text_length_filter": {"min_len": 4}}])
    assert djx_cli("process", first, "--quiet").rc == 0
    second = write_recipe(tmp_path / "two.yaml", dataset_path="one/kept.parquet", export_path="two/kept.jsonl",
                          np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 6}}])
    assert djx_cli("process", second, "--quiet").rc == 0
    third = write_recipe(tmp_path / "three.yaml", dataset_path="two/kept.jsonl", export_path="three/kept.jsonl",
                         np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 7}}])
    assert djx_cli("process", third, "--quiet").rc == 0
    two = read_jsonl(tmp_path / "two" / "kept.jsonl")
    assert [r["__dj__orig_pos__"] for r in two] == [i for i, t in enumerate(texts) if len(t) >= 6]
    assert [r[POS] for r in two] == [1, 3, 4]  # positions in the second run's input (the 5 kept of the first)
    assert [r["meta"] for r in two] == [records[i]["meta"] for i in (2, 4, 6)]  # parquet gave back list and string
    three = read_jsonl(tmp_path / "three" / "kept.jsonl")
    assert [r["__dj__orig_pos__"] for r in three] == [2, 4] and [r[POS] for r in three] == [0, 1]
    assert djx_cli("check", tmp_path / "three" / "kept.jsonl", "--recipe", third).rc == 0


def test_input_shards_or_stats_file_named_like_the_outputs_are_refused_not_deleted(tmp_path, text_dataset,
                                                                                    write_recipe, djx_cli):
    out = tmp_path / "out"
    out.mkdir()
    shard = out / "kept-00-of-02.jsonl"
    shard.write_bytes(text_dataset.path.read_bytes())
    recipe = _recipe(tmp_path, write_recipe, shard, "out/kept.jsonl")
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "is the input file" in res.err
    assert shard.read_bytes() == text_dataset.path.read_bytes()
    stats = out / "kept_stats.jsonl"
    shard.rename(stats)
    res = djx_cli("process", _recipe(tmp_path, write_recipe, stats, "out/kept.jsonl"), "--quiet")
    assert res.rc == 1 and "is the input file" in res.err and stats.exists()


def test_a_chained_run_on_ray_keeps_the_first_runs_position(ray_address, tmp_path, write_jsonl, write_recipe,
                                                            djx_cli, read_jsonl):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 9)} for i in range(40)])
    for executor in ("local", "ray"):
        keys = dict(np=1, executor=executor, ray_address=ray_address)
        first = write_recipe(tmp_path / f"one-{executor}.yaml", dataset_path=str(data),
                             export_path=f"one-{executor}/kept.jsonl", process=[{"text_length_filter": {"min_len": 3}}],
                             **keys)
        assert djx_cli("process", first, "--quiet").rc == 0
        assert all("__dj__orig_pos__" not in r for r in read_jsonl(tmp_path / f"one-{executor}" / "kept.jsonl"))
        second = write_recipe(tmp_path / f"two-{executor}.yaml", dataset_path=f"one-{executor}/kept.jsonl",
                              export_path=f"two-{executor}/kept.jsonl", process=[{"text_length_filter": {"min_len": 6}}],
                              **keys)
        res = djx_cli("process", second, "--quiet")
        assert res.rc == 0, res.err
        kept = read_jsonl(tmp_path / f"two-{executor}" / "kept.jsonl")
        assert [r["__dj__orig_pos__"] for r in kept] == [i for i in range(40) if i % 9 >= 6], executor
        assert [r["id"] for r in kept] == [r["__dj__orig_pos__"] for r in kept]
