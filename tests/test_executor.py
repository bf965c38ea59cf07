"""Running a chain: the local executor's outputs, order, accounting and memory bound; the Python
API's runs (what the built-in filters compute and keep, and Pipeline.process: tests/unit/)."""
from __future__ import annotations

import json

import pytest

from djx import DROP_KEY, POSITION_KEY, STATS_KEY, OpChain, Pipeline, RunContext, plan_workers
from djx.core.records import Item
from djx.core.executors.base import InputBatch
from djx.core.executors.local.executor import LocalExecutor
from djx.ops.filter.text_length_filter import TextLengthFilter

OUTPUTS = ("kept.jsonl", "kept.dropped.jsonl", "kept.rejected.jsonl")


def run_recipe(tmp_path, write_recipe, name: str, **keys) -> dict:
    keys.setdefault("export_path", f"{name}/kept.jsonl")
    keys.setdefault("start_method", "fork")
    recipe = write_recipe(tmp_path / f"{name}.yaml", **keys)
    return Pipeline.from_recipe(str(recipe)).run(progress=False)


# -- executor outputs --------------------------------------------------------------------------

def test_one_and_two_workers_write_identical_files(tmp_path, text_dataset, write_recipe):
    for np in (1, 2):
        run_recipe(tmp_path, write_recipe, f"np{np}", dataset_path=str(text_dataset.path), np=np,
                   batch_size=4, process=[{"text_length_filter": {"min_len": 3, "max_len": 9}}])
    for name in OUTPUTS:
        one, two = (tmp_path / "np1" / name).read_text(), (tmp_path / "np2" / name).read_text()
        assert one and one == two, name


def test_outputs_keep_input_order_when_batches_finish_out_of_order(tmp_path, plugin_site,
                                                                   write_jsonl, read_jsonl):
    from djx_test_plugin_ops import WaitForLaterBatchesMapper

    write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 5)} for i in range(90)])
    # the first batch waits until the other worker has finished three later batches
    (tmp_path / "passed").mkdir()
    wait = WaitForLaterBatchesMapper(ids=[2], later=3, folder=str(tmp_path / "passed"))
    pipe = Pipeline(ops=[TextLengthFilter(min_len=2), wait], np=2, batch_size=3, max_in_flight=8,
                    start_method="fork")
    pipe.run(str(tmp_path / "d.jsonl"), str(tmp_path / "out" / "kept.jsonl"), progress=False)
    kept = [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")]
    dropped = [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.dropped.jsonl")]
    assert kept == [i for i in range(90) if i % 5 >= 2]
    assert dropped == [i for i in range(90) if i % 5 < 2]


def test_one_slow_batch_does_not_stop_the_other_workers(tmp_path, plugin_site, write_jsonl, read_jsonl):
    """Results are written in input order; the reader's default window must still let the other
    worker go on while the oldest batch is slow (a window of only what the workers hold, 2 per
    worker, let it finish 2 batches and then stop)."""
    from djx_test_plugin_ops import WaitForLaterBatchesMapper

    write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "x" * (i % 5)} for i in range(90)])
    (tmp_path / "passed").mkdir()
    # the first batch waits until 10 later batches have passed the op in the other worker
    wait = WaitForLaterBatchesMapper(ids=[0], later=10, folder=str(tmp_path / "passed"), guard_s=30)
    pipe = Pipeline(ops=[wait], np=2, batch_size=3, start_method="fork")
    summary = pipe.run(str(tmp_path / "d.jsonl"), str(tmp_path / "out" / "kept.jsonl"), progress=False)
    assert summary["rejected"] == 0, read_jsonl(tmp_path / "out" / "kept.rejected.jsonl")
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == list(range(90))


def test_every_input_sample_is_accounted_for_exactly_once(tmp_path, text_dataset, write_recipe,
                                                          read_jsonl):
    summary = run_recipe(tmp_path, write_recipe, "run", dataset_path=str(text_dataset.path), np=2,
                         batch_size=5, process=[{"text_length_filter": {"min_len": 3}},
                                                {"text_length_filter": {"min_len": 0, "max_len": 8}}])
    assert summary["input"] == text_dataset.records
    assert summary["input"] == summary["kept"] + summary["dropped"] + summary["rejected"]
    assert summary["rejected"] == text_dataset.bad_lines
    assert summary["kept"] == len(text_dataset.kept_ids(3, 8))
    files = [read_jsonl(tmp_path / "run" / name) for name in OUTPUTS]
    assert [len(f) for f in files] == [summary["kept"], summary["dropped"], summary["rejected"]]
    positions = sorted(r[POSITION_KEY] for f in files for r in f)
    assert positions == list(range(summary["input"]))
    first, second = summary["ops"]
    assert first["in"] == summary["input"] - text_dataset.bad_lines
    for op in summary["ops"]:
        assert op["in"] == op["kept"] + op["dropped"] + op["rejected"]
    assert second["in"] == first["kept"] and second["kept"] == summary["kept"]


def test_summary_reports_counts_per_op_timings_memory_and_model_loads(tmp_path, text_dataset,
                                                                      write_recipe):
    summary = run_recipe(tmp_path, write_recipe, "run", dataset_path=str(text_dataset.path), np=2,
                         batch_size=8, process=[{"text_length_filter": {"min_len": 4}}])
    on_disk = json.loads((tmp_path / "run" / "kept.summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert summary["blank_lines"] == text_dataset.blank_lines
    (op,) = summary["ops"]
    assert op["name"] == "text_length_filter"
    assert (op["kept"], op["dropped"], op["rejected"]) == (summary["kept"], summary["dropped"], 0)
    assert isinstance(op["seconds"], float) and op["seconds"] >= 0
    assert summary["workers"] == 2
    assert summary["memory"]["main_peak_rss_bytes"] > 0
    assert set(on_disk["memory"]["worker_peak_uss_bytes"]) == {"0", "1"}
    assert len(summary["model_loads"]) == 2 and summary["max_model_loads_per_process"] == 0
    assert summary["check"]["ok"]
    assert summary["outputs"]["export"] == str(tmp_path / "run" / "kept.jsonl")
    # where the session's time went: start-up, processing at a steady rate, the end
    t = summary["timing"]
    assert min(t["startup_seconds"], t["end_seconds"]) >= 0 and t["processing_seconds"] > 0
    parts = t["startup_seconds"] + t["processing_seconds"] + t["end_seconds"]
    assert summary["session"]["seconds"] - 0.05 <= parts <= summary["session"]["seconds"] + 1.0
    assert t["steady_samples_per_second"] == pytest.approx(summary["input"] / t["processing_seconds"], rel=0.05)


def test_dropped_file_says_which_op_dropped_each_sample_and_keeps_its_stats(tmp_path, mm_records,
                                                                           mm_process, write_jsonl,
                                                                           write_recipe, read_jsonl):
    write_jsonl(tmp_path / "mm.jsonl", mm_records)
    summary = run_recipe(tmp_path, write_recipe, "run", dataset_path="mm.jsonl", np=2,
                         batch_size=3, process=mm_process)
    dropped = read_jsonl(tmp_path / "run" / "kept.dropped.jsonl")
    assert dropped and len(dropped) == summary["dropped"]
    stats_of = {"text_length_filter": {"text_len"},
                "image_shape_filter": {"text_len", "image_width", "image_height"},
                "image_aspect_ratio_filter": {"text_len", "image_width", "image_height", "aspect_ratios"}}
    for sample in dropped:
        drop = sample[DROP_KEY]
        assert drop["op"] == sample["expect"]
        assert mm_process[drop["op_index"]].keys() == {drop["op"]}
        assert set(sample[STATS_KEY]) == stats_of[drop["op"]]
        assert drop["reason"]
    kept = read_jsonl(tmp_path / "run" / "kept.jsonl")
    assert {s["expect"] for s in kept} == {"kept"}
    assert all(set(s[STATS_KEY]) == stats_of["image_aspect_ratio_filter"] for s in kept)
    rejected = read_jsonl(tmp_path / "run" / "kept.rejected.jsonl")
    assert {r["record"]["expect"] for r in rejected} == {"rejected"}
    assert any("missing.png" in r["reason"] for r in rejected)


def test_export_dropped_false_writes_no_dropped_file(tmp_path, text_dataset, write_recipe):
    stale = tmp_path / "run" / "kept.dropped.jsonl"
    stale.parent.mkdir()
    stale.write_text('{"left": "by an earlier run"}\n')
    summary = run_recipe(tmp_path, write_recipe, "run", dataset_path=str(text_dataset.path), np=2,
                         export_dropped=False, process=[{"text_length_filter": {"min_len": 4}}])
    assert not stale.exists()
    assert summary["outputs"]["dropped"] is None
    assert summary["dropped"] > 0
    assert summary["input"] == summary["kept"] + summary["dropped"] + summary["rejected"]
    assert (tmp_path / "run" / "kept.jsonl").exists()


# -- bounded reading -------------------------------------------------------------------------------

def test_the_reader_never_runs_more_than_max_in_flight_batches_ahead():
    max_in_flight, n_batches, batch_size = 3, 30, 4
    pulled = 0

    def lazily_generated_batches():
        nonlocal pulled
        for b in range(n_batches):
            pulled += 1
            yield InputBatch([Item(b * batch_size + i, record={"text": "x" * i}) for i in range(batch_size)])

    chain = OpChain([TextLengthFilter(min_len=2)], RunContext())
    plan = plan_workers(2, {}, [], cpu_count=2)
    executor = LocalExecutor(chain, plan, "fork", max_in_flight=max_in_flight)
    leads, kept = [], []
    for emitted, result in enumerate(executor.run(lazily_generated_batches()), 1):
        leads.append(pulled - emitted)
        kept += [json.loads(s)[POSITION_KEY] for s in result.kept]  # workers send JSON lines
    assert len(leads) == n_batches
    assert max(leads) <= max_in_flight
    assert max(leads) >= 1  # it does read ahead, so workers do not wait for the reader
    assert kept == [b * batch_size + i for b in range(n_batches) for i in range(2, batch_size)]


# -- Python API ---------------------------------------------------------------------------------------

def test_pipeline_from_recipe_runs_and_returns_the_summary(tmp_path, text_dataset, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 6}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert summary["kept"] == len(text_dataset.kept_ids(6))
    on_disk = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert json.loads(json.dumps(summary)) == on_disk


def test_pipeline_of_op_objects_runs_a_dataset_file(tmp_path, text_dataset, read_jsonl, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = Pipeline(ops=[TextLengthFilter(min_len=5)], np=2).run("data/data.jsonl", "out/kept.jsonl",
                                                                    progress=False)
    kept = read_jsonl(tmp_path / "out" / "kept.jsonl")
    assert [s["id"] for s in kept] == text_dataset.kept_ids(5)
    assert summary["workers"] == 2 and summary["kept"] == len(kept)
