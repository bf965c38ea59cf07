"""Stats a sample already carries are reused: re-filtering an export with a new threshold loads no
model and gives what a fresh run with that threshold gives;
`recompute_stats: true` and invalid stats compute again. Through the `djx` command."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from djx import Pipeline

pytestmark = pytest.mark.slow  # each runs the CLI on a model filter or two chained runs

ASSETS = Path(__file__).parent / "assets"
DEMO = ASSETS / "demo"
CLIP = str(ASSETS / "models" / "tiny-clip")


def _process(clip: str, min_score: float) -> list[dict]:
    return [{"text_length_filter": {"min_len": 30, "max_len": 1000}},
            {"image_aspect_ratio_filter": {"min_ratio": 0.5, "max_ratio": 2.0}},
            {"image_text_similarity_filter": {"hf_clip": clip, "min_score": min_score}}]


def _run(djx_cli, recipe) -> dict:
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    export = Path(recipe).parent / "out" / "o.jsonl"
    return json.loads(export.with_name("o.summary.json").read_text()) | {"table": res.out}


@pytest.fixture
def first_export(tmp_path, write_recipe, djx_cli):
    """The first 40 demo samples (image paths relative to the demo folder: image_root) through CLIP
    at min_score 0.2; the export path and its summary."""
    lines = (DEMO / "demo.jsonl").read_text().splitlines(keepends=True)[:40]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.jsonl").write_text("".join(lines))
    recipe = write_recipe(tmp_path / "one" / "r.yaml", dataset_path="../data/d.jsonl", export_path="out/o.jsonl",
                          image_root=str(DEMO), np=1, process=_process(CLIP, 0.2))
    summary = _run(djx_cli, recipe)
    assert summary["max_model_loads_per_process"] == 1
    return tmp_path / "one" / "out" / "o.jsonl", summary


@pytest.mark.models
def test_refiltering_an_export_reuses_its_stats_and_loads_no_model(tmp_path, first_export, write_recipe,
                                                                   read_jsonl, djx_cli):
    export, first = first_export
    refilter = write_recipe(tmp_path / "two" / "r.yaml", dataset_path=str(export), export_path="out/o.jsonl",
                            np=1, process=_process(CLIP, 0.23))
    again = _run(djx_cli, refilter)
    assert again["input"] == first["kept"] and 0 < again["kept"] < first["kept"]
    assert again["max_model_loads_per_process"] == 0 and all(not v for v in again["model_loads"].values())
    assert [op["reused_stats"] for op in again["ops"]] == [first["kept"]] * 3
    reasons = [s["__dj__drop__"]["reason"] for s in read_jsonl(tmp_path / "two" / "out" / "o.dropped.jsonl")]
    assert reasons and all(r.startswith("image_text_similarity=[") and r.endswith("] below min_score 0.23")
                           for r in reasons)
    assert "stats reused" in again["table"] and "image_text_similarity_filter " + str(first["kept"]) in again["table"]
    # a fresh run with the new threshold (the same chain, in this process) keeps the same samples
    # with the same stats
    fresh = write_recipe(tmp_path / "fresh" / "r.yaml", dataset_path="../data/d.jsonl", export_path="out/o.jsonl",
                         image_root=str(DEMO), np=1, process=_process(CLIP, 0.23))
    computed = {s["id"]: s["__dj__stats__"]
                for s in Pipeline.from_recipe(str(fresh)).process(read_jsonl(tmp_path / "data" / "d.jsonl"))}
    reused = {s["id"]: s["__dj__stats__"] for s in read_jsonl(tmp_path / "two" / "out" / "o.jsonl")}
    assert reused == computed


@pytest.mark.models
def test_recompute_stats_and_invalid_stats_compute_again(tmp_path, first_export, write_recipe, read_jsonl,
                                                         djx_cli):
    export, first = first_export
    kept = read_jsonl(export)
    kept[3]["__dj__stats__"]["image_text_similarity"] = []        # one value per chunk expected: invalid
    kept[5]["__dj__stats__"]["image_text_similarity"] = [float("nan")]  # not finite: invalid
    copy = tmp_path / "copy.jsonl"
    copy.write_text("".join(json.dumps(s) + "\n" for s in kept))
    recipe = write_recipe(tmp_path / "two" / "r.yaml", dataset_path=str(copy), export_path="out/o.jsonl",
                          np=1, process=_process(CLIP, 0.2))
    again = _run(djx_cli, recipe)
    assert again["ops"][2]["reused_stats"] == len(kept) - 2 and again["max_model_loads_per_process"] == 1
    out = {s["id"]: s["__dj__stats__"]["image_text_similarity"] for s in read_jsonl(tmp_path / "two/out/o.jsonl")}
    assert out[kept[3]["id"]] == pytest.approx(read_jsonl(export)[3]["__dj__stats__"]["image_text_similarity"])
    forced = _run(djx_cli, write_recipe(tmp_path / "three" / "r.yaml", dataset_path=str(copy),
                                        export_path="out/o.jsonl", np=1, recompute_stats=True,
                                        process=_process(CLIP, 0.2)))
    assert [op["reused_stats"] for op in forced["ops"]] == [0, 0, 0] and forced["kept"] == len(kept)


def test_a_stat_that_an_earlier_filter_of_the_run_wrote_is_computed_again(tmp_path, text_dataset):
    """Two filters writing one stat key with different models: the second scores with its own model,
    never with the value the first just wrote."""
    plugin = str(Path(__file__).parent / "plugins" / "ray_plugin_ops.py")
    score = lambda model, low: {"letter_score_filter": {"model": model, "min_score": low}}  # noqa: E731

    def kept(name, process):
        summary = Pipeline(dataset_path=str(text_dataset.path), export_path=str(tmp_path / name / "k.jsonl"),
                           process=process, custom_ops=[plugin], np=1, start_method="fork").run(progress=False)
        rows = [json.loads(line) for line in (tmp_path / name / "k.jsonl").read_text().splitlines()]
        return summary, {r["__dj__pos__"]: r["__dj__stats__"]["letter_score"] for r in rows}

    both, after_a = kept("both", [score("a", 0.0), score("bb", 0.46)])
    alone, bb_only = kept("alone", [score("bb", 0.46)])
    assert after_a == bb_only and len(bb_only) < both["input"]
    assert [op["reused_stats"] for op in both["ops"]] == [0, 0]


BLIP = str(ASSETS / "models" / "tiny-blip-itm")
AESTHETICS = str(ASSETS / "models" / "tiny-aesthetics-predictor-v2-linear")


def _model_process(clip_min: float) -> list[dict]:
    return [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": clip_min}},
            {"image_text_matching_filter": {"hf_blip": BLIP, "min_score": 0.0}},
            {"image_aesthetics_filter": {"hf_scorer_model": AESTHETICS, "min_score": -100.0, "max_score": 100.0}}]


@pytest.mark.models
@pytest.mark.parametrize("fmt", ["llava", "json", "parquet"])
def test_refiltering_an_export_in_any_format_loads_no_model(fmt, tmp_path, write_recipe, djx_cli):
    """LLaVA records (dataset_format: llava) and djx's .json and .parquet exports reuse their stats as
    a .jsonl export does: a tighter bound computes nothing and loads none of CLIP, BLIP, aesthetics."""
    rows = [json.loads(line) for line in (DEMO / "demo.jsonl").read_text().splitlines()[:12]]
    (tmp_path / "data").mkdir()
    if fmt == "llava":
        data = tmp_path / "data" / "d.json"
        data.write_text(json.dumps([{"id": r["id"], "image": r["images"][0], "conversations": [
            {"from": "human", "value": "<image>\nWhat is shown?"},
            {"from": "gpt", "value": r["text"].replace("<__dj__image>", "").replace("<|__dj__eoc|>", "").strip()}]}
            for r in rows]))
        extra, export = {"dataset_format": "llava"}, "out/o.json"
    else:
        data = tmp_path / "data" / "d.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        extra, export = {}, f"out/o.{fmt}"
    first = write_recipe(tmp_path / "one" / "r.yaml", dataset_path=str(data), export_path=export,
                         image_root=str(DEMO), np=1, start_method="fork", process=_model_process(-1.0), **extra)
    res = djx_cli("process", first, "--quiet")
    assert res.rc == 0, res.err
    out = tmp_path / "one" / export
    one = json.loads(out.with_name("o.summary.json").read_text())
    assert one["kept"] == 12 and one["max_model_loads_per_process"] >= 1
    again = write_recipe(tmp_path / "two" / "r.yaml", dataset_path=str(out), export_path=export,
                         image_root=str(DEMO), np=1, start_method="fork", process=_model_process(0.0), **extra)
    res = djx_cli("process", again, "--quiet")
    assert res.rc == 0, res.err
    two = json.loads((tmp_path / "two" / export).with_name("o.summary.json").read_text())
    assert two["max_model_loads_per_process"] == 0 and all(not v for v in two["model_loads"].values())
    assert [op["reused_stats"] for op in two["ops"]][0] == 12
    assert "models were loaded" not in res.out


def test_language_ids_are_reused_as_the_numbers_are(tmp_path, text_dataset, write_recipe, djx_cli):
    """language_id_score_filter writes a label (`lang`, a string) beside its score: both are reused."""
    pytest.importorskip("fasttext")
    import text_resources as R
    lid = R.write_fasttext_lid(tmp_path / "lid.bin")
    process = [{"language_id_score_filter": {"model_path": str(lid), "min_score": 0.0}}]
    first = write_recipe(tmp_path / "one" / "r.yaml", dataset_path=str(text_dataset.path), export_path="out/o.jsonl",
                         np=1, start_method="fork", process=process)
    one = _run(djx_cli, first)
    again = write_recipe(tmp_path / "two" / "r.yaml", dataset_path=str(tmp_path / "one" / "out" / "o.jsonl"),
                         export_path="out/o.jsonl", np=1, start_method="fork", process=process)
    two = _run(djx_cli, again)
    assert one["kept"] > 0 and two["ops"][0]["reused_stats"] == one["kept"] == two["kept"]


def test_an_op_that_reads_images_without_declaring_them_is_told_to(tmp_path):
    """Undeclared, its image paths would go unchecked and its stats reused after the images change:
    each sample is rejected with the line that says what to set."""
    from PIL import Image

    from djx import Filter
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")

    class Redness(Filter):
        name = "undeclared_redness_test_filter"
        stats_keys = ("red",)

        def compute_sample(self, sample, batch):
            batch.stats(sample)["red"] = batch.images.rgb(batch.image_refs(sample)[0]).getpixel((0, 0))[0]

        def keep(self, stats):
            return True

    pipe = Pipeline(ops=[Redness()])
    assert list(pipe.process([{"text": "x", "images": [str(tmp_path / "a.png")]}])) == []
    [rejected] = pipe.last_counts["rejected_records"]
    assert rejected["code"] == "op_error" and "does not set uses_images = True" in rejected["reason"]
    Redness.uses_images = True
    assert [s["__dj__stats__"]["red"] for s in pipe.process([{"text": "x", "images": str(tmp_path / "a.png")}])] == [255]
