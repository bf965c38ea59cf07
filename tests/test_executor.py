"""Running a chain: the local executor's outputs, order, accounting and memory bound; the Python
API; and what the built-in CPU filters compute and keep."""
from __future__ import annotations

import itertools
import json

import pytest

from djx import DROP_KEY, POSITION_KEY, STATS_KEY, OpChain, Pipeline, RunContext, plan_workers
from djx.core.records import Item
from djx.core.executors.base import InputBatch
from djx.core.executors.local.executor import LocalExecutor
from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
from djx.ops.filter.image_shape_filter import ImageShapeFilter
from djx.ops.filter.image_size_filter import ImageSizeFilter
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


def test_process_streams_an_iterator_batch_by_batch():
    pulled = 0

    def endless_samples():
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield {"id": i, "text": "word " * (i % 4)}

    pipe = Pipeline(ops=[TextLengthFilter(min_len=10)], batch_size=8)
    first = list(itertools.islice(pipe.process(endless_samples()), 3))
    assert [s["id"] for s in first] == [2, 3, 6]
    assert [s[STATS_KEY]["text_len"] for s in first] == [10, 15, 10]
    assert pulled <= 8  # one batch read, not the whole (endless) input


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


def test_process_yields_kept_samples_with_stats_and_counts_the_rest():
    pipe = Pipeline(ops=[TextLengthFilter(min_len=5)])
    samples = [{"text": "long enough"}, {"text": "tiny"}, {"no_text": 1}, {"text": "exactly"}]
    kept = list(pipe.process(iter(samples)))
    assert [s["text"] for s in kept] == ["long enough", "exactly"]
    assert [s[STATS_KEY] for s in kept] == [{"text_len": 11}, {"text_len": 7}]
    counts = pipe.last_counts
    assert (counts["input"], counts["kept"], counts["dropped"], counts["rejected"]) == (4, 2, 1, 1)
    assert "missing text key 'text'" in counts["rejected_records"][0]["reason"]
    assert samples[0] == {"text": "long enough"}  # the caller's dicts are not modified


# -- built-in CPU filters -------------------------------------------------------------------------

def kept_indices(op, samples) -> list[int]:
    tagged = [dict(s, _i=i) for i, s in enumerate(samples)]
    return [s["_i"] for s in Pipeline(ops=[op], batch_size=len(samples)).process(tagged)]


def stats_of(op, sample) -> dict:
    """The stats `op` writes for a sample it keeps."""
    (out,) = Pipeline(ops=[op]).process([sample])
    return out[STATS_KEY]


def test_text_length_filter_keeps_a_closed_interval():
    samples = [{"text": "x" * n} for n in (2, 3, 5, 6)]
    assert kept_indices(TextLengthFilter(min_len=3, max_len=5), samples) == [1, 2]
    assert stats_of(TextLengthFilter(min_len=0), {"text": "héllo"}) == {"text_len": 5}


def test_image_shape_filter_keeps_a_closed_interval_per_side(make_image):
    imgs = {size: str(make_image(f"{size[0]}x{size[1]}.png", size)) for size in
            [(10, 20), (20, 10), (9, 15), (21, 15), (15, 9), (15, 21)]}
    samples = [{"text": "", "images": [p]} for p in imgs.values()]
    op = ImageShapeFilter(min_width=10, max_width=20, min_height=10, max_height=20)
    assert kept_indices(op, samples) == [0, 1]
    assert stats_of(ImageShapeFilter(), samples[0]) == {"image_width": [10], "image_height": [20]}


def test_image_aspect_ratio_filter_keeps_a_closed_interval(make_image):
    sizes = [(20, 10), (10, 20), (21, 10), (10, 21)]
    samples = [{"text": "", "images": [str(make_image(f"{w}x{h}.png", (w, h)))]} for w, h in sizes]
    assert kept_indices(ImageAspectRatioFilter(min_ratio=0.5, max_ratio=2.0), samples) == [0, 1]
    assert stats_of(ImageAspectRatioFilter(min_ratio=0, max_ratio=100), samples[0]) == \
        {"aspect_ratios": [2.0]}


def _file_of_size(make_image, name: str, n_bytes: int) -> str:
    """A small PNG padded to exactly n_bytes (the size filter reads the size on disk)."""
    path = make_image(name, (16, 16))
    data = path.read_bytes()
    assert len(data) <= n_bytes
    path.write_bytes(data + b"\0" * (n_bytes - len(data)))
    return str(path)


def test_image_size_filter_keeps_a_closed_interval_of_file_bytes(make_image, tmp_path):
    paths = [_file_of_size(make_image, f"{n}.png", n) for n in (999, 1000, 2000, 2001)]
    samples = [{"text": "", "images": [p]} for p in paths]
    assert kept_indices(ImageSizeFilter(min_size=1000, max_size=2000), samples) == [1, 2]
    assert kept_indices(ImageSizeFilter(min_size="1000", max_size="2000B"), samples) == [1, 2]
    assert stats_of(ImageSizeFilter(), samples[0]) == {"image_sizes": [999]}


def test_image_size_filter_reads_sizes_like_data_juicer(make_image, tmp_path):
    """Data-Juicer's size_to_bytes counts KB and KiB alike as 1024 bytes (MB as 1024**2); a
    Data-Juicer recipe with max_size '10KB' must keep the same images in djx."""
    paths = [_file_of_size(make_image, f"{n}.png", n) for n in (10_000, 10_240, 10_241)]
    samples = [{"text": "", "images": [p]} for p in paths]
    assert kept_indices(ImageSizeFilter(max_size="10KiB"), samples) == [0, 1]
    assert kept_indices(ImageSizeFilter(max_size="10KB"), samples) == [0, 1]


def test_image_size_filter_rejects_a_malformed_size():
    with pytest.raises(Exception, match="max_size: expected a size like"):
        ImageSizeFilter(max_size="ten megs")


@pytest.mark.parametrize("op", [ImageShapeFilter(min_width=32), ImageAspectRatioFilter(max_ratio=2.0),
                                ImageSizeFilter(min_size=300)],
                         ids=lambda op: op.name)
def test_image_filters_apply_any_or_all_to_samples_with_several_images(op, make_image):
    good, bad = str(make_image("good.png", (64, 64))), str(make_image("bad.png", (16, 64)))
    if op.name == "image_size_filter":
        good, bad = _file_of_size(make_image, "good.png", 1000), _file_of_size(make_image, "bad.png", 200)
    samples = [{"text": "", "images": [good, bad]}, {"text": "", "images": [good, good]},
               {"text": "", "images": [bad]}, {"text": "", "images": []}]
    assert kept_indices(op, samples) == [0, 1, 3]  # any is the default
    strict = type(op)(**op.params(), any_or_all="all")
    assert kept_indices(strict, samples) == [1, 3]  # a sample without images is kept


def test_image_filters_write_empty_stats_for_a_sample_without_images():
    for op in (ImageShapeFilter(), ImageAspectRatioFilter(), ImageSizeFilter()):
        stats = stats_of(op, {"text": "no pictures", "images": []})
        assert set(stats) == set(op.stats_keys) and all(v == [] for v in stats.values())


def test_a_missing_or_broken_image_rejects_the_sample_with_the_file_named(make_image, tmp_path):
    ok = str(make_image("ok.png", (30, 30)))
    broken = tmp_path / "images" / "broken.png"
    broken.write_bytes(b"not really a png")
    pipe = Pipeline(ops=[ImageShapeFilter()])
    samples = [{"text": "", "images": [ok]}, {"text": "", "images": [str(tmp_path / "gone.png")]},
               {"text": "", "images": [str(broken)]}]
    assert len(list(pipe.process(samples))) == 1
    reasons = [r["reason"] for r in pipe.last_counts["rejected_records"]]
    assert "gone.png" in reasons[0] and "broken.png" in reasons[1]

