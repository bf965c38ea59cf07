"""The image-only model filters (aesthetics, NSFW, watermark) on the shipped tiny models: Data-Juicer
1.6.1's numbers, the same from_pretrained path a hub id takes, one value per image with any/all,
drop reasons naming the threshold, and a bad image or a wrong model rejected or refused with why."""
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from djx import Pipeline, STATS_KEY
from djx.core.models.pool import estimate_bytes, loader_for
from djx.core.recipe.recipe import recipe_from_dict
from djx.ops.filter.image_aesthetics_filter import ImageAestheticsFilter
from djx.ops.filter.image_nsfw_filter import ImageNSFWFilter
from djx.ops.filter.image_watermark_filter import ImageWatermarkFilter

pytestmark = [pytest.mark.slow, pytest.mark.models]

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "assets" / "models"
AESTHETICS = str(MODELS / "tiny-aesthetics-predictor-v2-linear")
NSFW = str(MODELS / "tiny-vit-nsfw")
WATERMARK = str(MODELS / "tiny-vit-watermark")
FIXTURE = json.loads((REPO / "tests" / "assets" / "dj_fixtures" / "image_models.json").read_text())
DEMO_IMAGES = sorted((REPO / "tests" / "assets" / "demo" / "images").glob("*.jpg"))
STATS = {"aesthetics": "image_aesthetics_scores", "nsfw": "image_nsfw_score", "watermark": "image_watermark_prob"}


def make(kind: str, **params):
    if kind == "aesthetics":
        return ImageAestheticsFilter(hf_scorer_model=AESTHETICS, **params)
    if kind == "nsfw":
        return ImageNSFWFilter(hf_nsfw_model=NSFW, **params)
    return ImageWatermarkFilter(hf_watermark_model=WATERMARK, **params)


def wide(kind: str):
    return make(kind, prob_threshold=1.0) if kind == "watermark" else make(kind, min_score=-1e9, max_score=1e9)


def run(ops, samples, batch_size=16):
    pipe = Pipeline(ops=ops, batch_size=batch_size)
    kept = list(pipe.process([dict(s, _i=i) for i, s in enumerate(samples)]))
    return kept, pipe.last_counts


def scores_of(kind, paths) -> list[float]:
    kept, counts = run([wide(kind)], [{"images": [str(p)]} for p in paths])
    assert counts["rejected"] == 0, counts
    return [s[STATS_KEY][STATS[kind]][0] for s in kept]


def test_the_filters_give_data_juicers_numbers():
    """Data-Juicer 1.6.1 ran the three ops on these images (tools/dj_fixtures/image_models.py);
    djx gives its stats within 1e-5, EXIF orientations, alpha, 16-bit, palette and CMYK files
    included; one value per distinct image path of a sample, in the order of first listing, as
    Data-Juicer writes them (a sample names one image twice)."""
    records = FIXTURE["records"]
    ops = [make("aesthetics", min_score=-1000.0, max_score=1000.0), make("nsfw", min_score=-1000.0, max_score=1000.0),
           make("watermark", prob_threshold=1.0)]
    kept, counts = run(ops, [{"id": r["id"], "images": [str(REPO / p) for p in r["images"]]} for r in records])
    assert len(kept) == len(records), counts
    for record, out in zip(records, kept):
        assert out["id"] == record["id"]
        for key, expected in record["stats"].items():
            got = out[STATS_KEY][key]
            assert len(got) == len(set(record["images"])), (record["id"], key)
            assert got == pytest.approx(expected, abs=1e-5), (record["id"], key)
    assert any(len(set(r["images"])) < len(r["images"]) for r in records)  # the fixture names an image twice


def test_a_folder_loads_as_a_hub_id_would_and_scores_as_a_plain_forward():
    """The classifier filters score softmax(logits)[:, 1] of transformers' own model and processor."""
    import torch
    from transformers import AutoModelForImageClassification, AutoProcessor  # not at collection: seconds
    paths = DEMO_IMAGES[:5]
    for kind, folder in (("nsfw", NSFW), ("watermark", WATERMARK)):
        model = AutoModelForImageClassification.from_pretrained(folder).eval()
        proc = AutoProcessor.from_pretrained(folder)
        with torch.no_grad():
            logits = model(**proc(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt")).logits
        assert scores_of(kind, paths) == pytest.approx(torch.softmax(logits, -1)[:, 1].tolist(), abs=1e-6)


@pytest.mark.parametrize("kind", ["aesthetics", "nsfw", "watermark"])
def test_a_threshold_between_two_images_keeps_one_and_names_the_stat_value_and_bound(kind):
    low, high = sorted(scores_of(kind, DEMO_IMAGES[:8]))[3:5]
    assert low < high
    cut = (low + high) / 2
    op = make(kind, prob_threshold=cut) if kind == "watermark" else make(kind, min_score=-1e9, max_score=cut)
    pipe = Pipeline(ops=[op], batch_size=8)
    kept = list(pipe.process([{"images": [str(p)]} for p in DEMO_IMAGES[:8]]))
    assert len(kept) == 4 and pipe.last_counts["dropped"] == 4
    assert all(s[STATS_KEY][STATS[kind]][0] <= cut for s in kept)
    bound = "prob_threshold" if kind == "watermark" else "max_score"
    reason = op.drop_reason({STATS[kind]: [high]})
    assert reason.startswith(f"{STATS[kind]}=[") and f"above {bound} {cut:.4g}" in reason


@pytest.mark.parametrize("kind", ["aesthetics", "nsfw", "watermark"])
def test_any_or_all_decides_over_a_samples_images(kind):
    values = scores_of(kind, DEMO_IMAGES[:2])
    lo, hi = sorted(range(2), key=lambda i: values[i])
    cut = (values[lo] + values[hi]) / 2
    ok, bad = str(DEMO_IMAGES[lo]), str(DEMO_IMAGES[hi])
    samples = [{"images": [ok, bad]}, {"images": [ok, ok]}, {"images": [bad]}, {"images": []}]
    for any_or_all, expected in (("any", [0, 1, 3]), ("all", [1, 3])):
        bound = {"prob_threshold": cut} if kind == "watermark" else {"min_score": -1e9, "max_score": cut}
        kept, _ = run([make(kind, any_or_all=any_or_all, **bound)], samples)
        assert [s["_i"] for s in kept] == expected
    assert kept[-1][STATS_KEY][STATS[kind]] == []  # a sample without images: kept, empty stats


def test_an_unreadable_image_rejects_only_its_sample_with_the_file_named(tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not a jpeg")
    samples = [{"images": [str(DEMO_IMAGES[0])]}, {"images": [str(DEMO_IMAGES[1]), str(broken)]},
               {"images": [str(tmp_path / "gone.png")]}, {"images": ["https://example.com/a.jpg"]},
               {"images": [str(DEMO_IMAGES[2])]}]
    kept, counts = run([wide("aesthetics"), wide("nsfw"), wide("watermark")], samples)
    assert [s["_i"] for s in kept] == [0, 4]
    reasons = [r["reason"] for r in counts["rejected_records"]]
    assert "broken.jpg" in reasons[0] and "gone.png" in reasons[1] and "a URL" in reasons[2]
    assert all(r["code"] == "bad_image" for r in counts["rejected_records"])


def test_a_model_that_is_not_what_the_filter_needs_is_refused_with_why(tmp_path):
    """A run never scores with the wrong model: the load fails with what is wrong, which the run
    reports (here: as the reason of the sample it could not score)."""
    cases = [(ImageAestheticsFilter(hf_scorer_model=NSFW, min_score=0.0),
              "is not an aesthetics predictor this filter knows: its config names none of AestheticsPredictorV1"),
             (ImageNSFWFilter(hf_nsfw_model=str(tmp_path / "no-such-model")),
              "cannot load an image classifier from '.*no-such-model' \\(no such local folder")]
    for op, message in cases:
        kept, counts = run([op], [{"images": [str(DEMO_IMAGES[0])]}])
        assert kept == [] and re.search(message, counts["rejected_records"][0]["reason"])


def test_a_recipe_takes_data_juicers_names_defaults_and_a_relative_model_folder(tmp_path):
    recipe = recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl", "process": [
        {"image_aesthetics_filter": {}}, {"image_nsfw_filter": {}}, {"image_watermark_filter": {}},
        {"image_nsfw_filter": {"hf_nsfw_model": "tests/assets/models/tiny-vit-nsfw"}}]}, str(REPO))
    aesthetics, nsfw, watermark, local = recipe.build_ops()
    assert aesthetics.model_name == "shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE"
    assert (aesthetics.min_score, aesthetics.max_score, aesthetics.any_or_all) == (0.5, 1.0, "any")
    assert (nsfw.hf_nsfw_model, nsfw.min_score, nsfw.max_score) == ("Falconsai/nsfw_image_detection", 0.0, 0.5)
    assert (watermark.hf_watermark_model, watermark.prob_threshold) == ("amrul-hzz/watermark_detector", 0.8)
    assert Path(local.hf_nsfw_model) == Path(NSFW)  # resolved against the recipe's folder


def test_the_planner_sizes_each_model_from_its_config():
    """The estimate comes from the config alone (a meta-device model), near the real weights' size,
    not the 2 GiB a model without a readable config is planned at."""
    for op in (wide("aesthetics"), wide("nsfw"), wide("watermark")):
        (spec,) = op.model_specs()
        real = sum(p.numel() * 4 for p in loader_for(spec)(spec, "cpu").parameters())
        assert real <= estimate_bytes(spec) <= 1.2 * real


def test_workers_map_one_shared_copy_and_score_as_with_private_copies(tmp_path):
    """np=2: the three models (the aesthetics predictor's own class included) travel through the
    run's one shared copy, and score bit for bit as privately loaded copies do."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "images": [str(p)]}) + "\n" for i, p in enumerate(DEMO_IMAGES[:8])))
    process = [{"image_aesthetics_filter": {"hf_scorer_model": AESTHETICS, "min_score": 0.5, "max_score": 1.0}},
               {"image_nsfw_filter": {"hf_nsfw_model": NSFW, "max_score": 0.9}},
               {"image_watermark_filter": {"hf_watermark_model": WATERMARK}}]
    runs = {}
    for share in (True, False):
        recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / str(share) / "o.jsonl"),
                                   "np": 2, "batch_size": 2, "start_method": "fork", "share_models": share,
                                   "process": process}, str(tmp_path))
        runs[share] = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    outs = {share: [(tmp_path / str(share) / f).read_text() for f in ("o.jsonl", "o.dropped.jsonl")]
            for share in runs}
    assert outs[True] == outs[False] and runs[True]["kept"] + runs[True]["dropped"] == 8
    assert runs[True]["memory"]["shared_weight_bytes_per_device"]["cpu"] > 0
    assert runs[False]["memory"]["shared_weight_bytes_per_device"] == {}


def test_checkpoints_the_aesthetics_package_wrote_load_with_their_own_head():
    """v1 and v2-ReLU predictors saved by simple-aesthetics-predictor (the classes Data-Juicer loads
    shunk031's models with; tools/dj_fixtures/aesthetics_heads.py) score as the package scored
    them. Their folder names lack 'aesthetics-predictor', so the raw output is the score."""
    fixture = json.loads((REPO / "tests" / "assets" / "dj_fixtures" / "aesthetics_heads.json").read_text())
    samples = [{"images": [str(REPO / p)]} for p in fixture["images"]]
    for folder, expected in fixture["scores"].items():
        op = ImageAestheticsFilter(hf_scorer_model=str(REPO / folder), min_score=-1e9, max_score=1e9)
        kept, counts = run([op], samples)
        assert [s[STATS_KEY]["image_aesthetics_scores"][0] for s in kept] == pytest.approx(expected, abs=1e-5), folder


def test_a_hub_id_that_does_not_load_is_told_what_to_do_and_not_to_set_what_is_set(monkeypatch):
    from djx import ModelSpec
    from djx.ops.models import cannot_load
    spec = ModelSpec("hf_clip", "no-such-org/no-such-model")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    online = str(cannot_load("CLIPModel", spec, OSError("not found")))
    assert "set HF_HUB_OFFLINE=1 to fail at once" in online and "save_pretrained" in online
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = str(cannot_load("CLIPModel", spec, OSError("not found")))
    assert "HF_HUB_OFFLINE is set: it is not tried" in offline and "set HF_HUB_OFFLINE=1" not in offline
