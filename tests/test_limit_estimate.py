"""Trial runs: `djx process RECIPE --limit N` processes the first N samples, writes outputs marked
partial that `djx check` accepts, estimates the whole dataset in its summary and table, and is never
resumed by the full run that follows."""
import json

import pytest
import yaml

from conftest import read_jsonl_file

from djx.core.io import input_size
from djx.core.io.input_size import measure_input


def text_recipe(tmp_path, dataset, **extra):
    recipe = {"dataset_path": str(dataset), "export_path": "out/o.jsonl", "np": 1, "batch_size": 8,
              "start_method": "fork", "process": [{"text_length_filter": {"min_len": 10}}], **extra}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def write_shards(folder, files=3, per_file=30, blank_every=7):
    """Shards of `per_file` samples each (ids 0..), a blank line now and then; every third text short."""
    folder.mkdir(parents=True, exist_ok=True)
    i = 0
    for f in range(files):
        lines = []
        for _ in range(per_file):
            text = "short" if i % 3 == 0 else f"a long enough text number {i}"
            lines.append(json.dumps({"id": i, "text": text}))
            if i % blank_every == 0:
                lines.append("   ")
            i += 1
        (folder / f"part-{f}.jsonl").write_text("\n".join(lines) + "\n")
    return i


def outputs(tmp_path):
    out = tmp_path / "out"
    summary = json.loads((out / "o.summary.json").read_text())
    kept = read_jsonl_file(out / "o.jsonl")
    dropped = read_jsonl_file(out / "o.dropped.jsonl")
    return summary, kept, dropped


def test_a_trial_of_a_sharded_dataset_estimates_the_whole_and_the_full_run_starts_over(tmp_path, djx_cli):
    n = write_shards(tmp_path / "data")
    recipe = text_recipe(tmp_path, tmp_path / "data")
    res = djx_cli("process", recipe, "--limit", 45)
    assert res.rc == 0, res.err
    summary, kept, dropped = outputs(tmp_path)
    assert summary["partial"] is True and summary["limit"] == 45 and summary["input"] == 45
    ids = sorted(s["id"] for s in kept + dropped)
    assert ids == list(range(45))  # the first 45 samples, across the first two shards
    assert {s["__dj__pos__"] for s in kept + dropped} == set(range(45))
    est = summary["estimate"]
    assert est["samples"] == n == 90 and est["samples_how"].startswith("exact")
    assert est["keep_rate"] == pytest.approx(len(kept) / 45, abs=1e-4)
    assert est["keep_rate_ops"] == {"text_length_filter": pytest.approx(len(kept) / 45, abs=1e-4)}
    assert est["seconds"] > 0 and est["peak_memory_bytes"] > 0
    for key in ("samples_how", "seconds_how", "keep_rate_how", "peak_memory_how"):
        assert len(est[key]) > 20
    assert "1 worker" in est["seconds_how"] and "load average" in est["seconds_how"]
    assert "partial run: the first 45 samples (--limit 45)" in res.out
    assert "estimate for the whole dataset (90 samples): about " in res.out and "67% kept" in res.out

    check = djx_cli("check", tmp_path / "out/o.jsonl", "--recipe", recipe)
    assert check.rc == 0, check.out + check.err
    assert "trial run (--limit 45)" in check.out and "check passed" in check.out

    full = djx_cli("process", recipe)
    assert full.rc == 0, full.err
    summary, kept, dropped = outputs(tmp_path)
    assert summary["input"] == 90 and summary["partial"] is False and "estimate" not in summary
    assert not summary["resumed"]
    assert sorted(s["id"] for s in kept + dropped) == list(range(90))
    assert "estimate for the whole dataset" not in full.out


def test_a_limit_counts_samples_not_blank_lines_on_a_single_file(tmp_path, djx_cli):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(("\n" if i % 2 else "") + json.dumps({"id": i, "text": "x" * (5 + i)}) + "\n"
                            for i in range(20)))
    res = djx_cli("process", text_recipe(tmp_path, data), "--limit", 7, "--quiet")
    assert res.rc == 0, res.err
    summary, kept, dropped = outputs(tmp_path)
    assert sorted(s["id"] for s in kept + dropped) == list(range(7))
    assert summary["input"] == 7 and summary["estimate"]["samples"] == 20
    assert summary["estimate"]["keep_rate"] == pytest.approx(2 / 7, abs=1e-4)  # texts of 10 and 11 chars


def test_a_limit_past_the_end_is_a_whole_run(tmp_path, djx_cli):
    n = write_shards(tmp_path / "data", files=1, per_file=12)
    res = djx_cli("process", text_recipe(tmp_path, tmp_path / "data"), "--limit", 12)
    assert res.rc == 0, res.err
    summary, _, _ = outputs(tmp_path)
    assert summary["input"] == n and summary["partial"] is False and summary["limit"] == 12
    assert "estimate" not in summary
    assert "this run covered all of it" in res.out


def stops_at_record_20(tmp_path) -> dict:
    """Pipeline keys of a 60-record text run whose record 20 is broken JSON: with on_error "fail"
    the run stops there, after saving 16 samples for a resume (batches of 8)."""
    lines = [json.dumps({"id": i, "text": f"sample number {i:04d}"}) for i in range(60)]
    lines[20] = '{"id": 20, "text": '
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return {"dataset_path": str(data), "export_path": str(tmp_path / "out/o.jsonl"), "batch_size": 8, "np": 1,
            "start_method": "fork", "checkpoint_every": 100, "process": [{"text_length_filter": {"min_len": 5}}]}


def test_an_interrupted_trial_is_discarded_by_the_full_run_and_a_trial_refuses_an_unfinished_full_run(tmp_path):
    from djx import Pipeline
    from djx.core.errors import ResumeError
    from djx.core.records import FailFast
    keys = stops_at_record_20(tmp_path)
    log = []
    with pytest.raises(FailFast):
        Pipeline(**keys, on_error="fail").run(progress=False, log=log.append, limit=40)
    assert (tmp_path / "out/.o.djx-state/manifest.json").exists()  # 16 samples saved for a resume
    summary = Pipeline(**keys).run(progress=False, log=log.append)
    assert any("held an unfinished trial run (--limit 40)" in line and "discarded" in line for line in log)
    assert not summary["resumed"] and summary["input"] == 60 and summary["check"]["ok"]

    with pytest.raises(FailFast):
        Pipeline(**keys, on_error="fail").run(progress=False, log=log.append, restart=True)
    with pytest.raises(ResumeError, match="unfinished run of the whole dataset.*without --limit.*--restart"):
        Pipeline(**keys).run(progress=False, log=log.append, limit=10)
    summary = Pipeline(**keys).run(progress=False, log=log.append)  # the full run is still there to finish
    assert summary["resumed"] and summary["input"] == 60


def test_a_trial_resumes_as_a_trial(tmp_path):
    from djx import Pipeline
    from djx.core.records import FailFast
    keys = stops_at_record_20(tmp_path)
    with pytest.raises(FailFast):
        Pipeline(**keys, on_error="fail").run(progress=False, log=lambda *a: None, limit=30)
    log = []
    summary = Pipeline(**keys).run(progress=False, log=log.append, limit=30)
    assert any("resuming: 16 samples already done" in line for line in log)
    assert summary["resumed"] and summary["input"] == 30 and summary["partial"] and summary["check"]["ok"]
    assert summary["estimate"]["samples"] == 60 and summary["session"]["samples"] == 14


@pytest.mark.parametrize("value, message", [("0", "positive number of samples"),
                                            ("-3", "positive number of samples")])
def test_a_bad_limit_is_refused(tmp_path, djx_cli, value, message):
    write_shards(tmp_path / "data", files=1, per_file=5)
    res = djx_cli("process", text_recipe(tmp_path, tmp_path / "data"), "--limit", value)
    assert res.rc == 1 and message in res.err and "Traceback" not in res.err


def test_a_trial_on_ray_takes_the_same_samples_as_on_the_local_executor(tmp_path, djx_cli, ray_address):
    n = write_shards(tmp_path / "data")
    got = {}
    for executor in ("local", "ray"):
        recipe = text_recipe(tmp_path, tmp_path / "data", export_path=f"{executor}/o.jsonl", executor=executor,
                             ray_address=ray_address)
        res = djx_cli("process", recipe, "--limit", 40, "--quiet")
        assert res.rc == 0, res.err
        summary = json.loads((tmp_path / executor / "o.summary.json").read_text())
        assert summary["partial"] is True and summary["input"] == 40 and summary["check"]["ok"]
        assert summary["estimate"]["samples"] == n
        rows = [json.loads(line) for name in ("o.jsonl", "o.dropped.jsonl")
                for line in (tmp_path / executor / name).read_text().splitlines()]
        got[executor] = sorted((r["__dj__pos__"], r["id"]) for r in rows)
        assert djx_cli("check", tmp_path / executor / "o.jsonl", "--recipe", recipe).rc == 0
    assert got["ray"] == got["local"] and [i for _, i in got["ray"]] == list(range(40))


def test_parquet_sizes_are_exact_and_a_trial_on_parquet_estimates_them(tmp_path, djx_cli):
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder = tmp_path / "data"
    folder.mkdir()
    for f in range(2):
        ids = list(range(f * 250, (f + 1) * 250))
        pq.write_table(pa.table({"id": ids, "text": [f"text number {i}" for i in ids]}), folder / f"p{f}.parquet",
                       row_group_size=100)
    assert measure_input(sorted(map(str, folder.iterdir()))).samples == 500
    res = djx_cli("process", text_recipe(tmp_path, folder), "--limit", 50, "--quiet")
    assert res.rc == 0, res.err
    summary, kept, dropped = outputs(tmp_path)
    assert summary["input"] == 50 and sorted(s["id"] for s in kept + dropped) == list(range(50))
    assert summary["estimate"]["samples"] == 500 and summary["estimate"]["samples_how"].startswith("exact")


def test_large_json_lines_and_json_arrays_are_estimated_from_bytes_per_record(tmp_path, monkeypatch):
    import random
    rng = random.Random(1)
    records = [{"id": i, "text": "w " * rng.randint(5, 60)} for i in range(5000)]
    jsonl = tmp_path / "big.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert measure_input([str(jsonl)]).samples == 5000  # small enough to count: exact
    monkeypatch.setattr(input_size, "COUNT_UP_TO", 0)        # as if it were too large to count
    monkeypatch.setattr(input_size, "SAMPLE_BYTES", 64 << 10)
    size = measure_input([str(jsonl)])
    assert not size.exact and size.how.startswith("estimated")
    assert size.samples == pytest.approx(5000, rel=0.1)
    array = tmp_path / "big.json"
    array.write_text(json.dumps(records, indent=1))
    size = measure_input([str(array)])
    assert not size.exact and size.samples == pytest.approx(5000, rel=0.1)
    small = tmp_path / "small.json"
    small.write_text(json.dumps(records[:30]))
    assert measure_input([str(small)]) == input_size.InputSize(30, True, "exact: every record of 1 file read")


def test_a_dataset_of_unknown_size_gets_no_estimate_but_says_why(tmp_path, monkeypatch):
    from djx import Pipeline
    monkeypatch.setattr(input_size, "SAMPLE_BYTES", 64)  # records larger than the bytes sampled
    data = tmp_path / "data.json"
    data.write_text(json.dumps([{"id": i, "text": "a long text " * 20} for i in range(5)]))
    log = []
    summary = Pipeline(dataset_path=str(data), np=1, start_method="fork",
                       process=[{"text_length_filter": {"min_len": 5}}]).run(
        export_path=str(tmp_path / "out/o.jsonl"), progress=False, log=log.append, limit=2)
    assert summary["partial"] and summary["input"] == 2 and summary["estimate"]["samples"] == 0
    assert "no estimate: the dataset's size is unknown" in log[-1]
