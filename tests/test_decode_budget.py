"""Decoded pixels are counted: a batch of small PNG files that each decode to 12000x12000 would
take gigabytes in one worker. A batch whose images together pass `max_decoded_bytes` is done in
parts (the samples that did not fit run again with nothing held), so whether a photo is kept never
depends on the batch it came in; only a sample whose own images pass the budget is rejected, with
code decode_budget and a reason saying what to raise."""
from __future__ import annotations

import pytest
from PIL import Image

from djx import Batch, Filter, Pipeline

pytestmark = pytest.mark.slow  # 112 MB images decoded, and a model's forwards


class MeanRed(Filter):
    """Reads every image's pixels and holds them until the op ends, as a model filter does."""
    name = "mean_red_test_filter"
    uses_images = True
    stats_keys = ("mean_red",)

    def compute_stats(self, batch: Batch) -> None:
        decoded = {}
        for i, sample in enumerate(batch.samples):
            try:
                decoded[i] = [batch.images.rgb(ref) for ref in sample[batch.image_key]]
            except Exception as e:  # noqa: BLE001  (as the model filters do: the sample, not the batch)
                batch.reject(i, str(e), getattr(e, "code", None))
        for i, images in decoded.items():
            batch.stats(batch.samples[i])["mean_red"] = sum(im.getpixel((0, 0))[0] for im in images) / len(images)

    def keep(self, stats: dict) -> bool:
        return True


class BlueCorner(MeanRed):
    """A second op reading the same pixels: what the first held for it may have to be decoded again."""
    name = "blue_corner_test_filter"
    stats_keys = ("blue",)

    def compute_stats(self, batch: Batch) -> None:
        for sample in batch.samples:
            batch.stats(sample)["blue"] = batch.images.rgb(sample[batch.image_key][0]).getpixel((0, 0))[2]


def _photos(folder, n):
    colours = ["white", "black", "red", "blue", "green"]
    for k in range(n):
        Image.new("RGB", (4000, 4000), colours[k % 5]).save(folder / f"big{k}.png")  # ~50 KB, 112 MB decoded
    return [{"text": "x", "images": [str(folder / f"big{k}.png")]} for k in range(n)]


def _stats(kept):
    return sorted((s["images"][0], s["__dj__stats__"].get("mean_red"), s["__dj__stats__"].get("blue")) for s in kept)


def test_photos_that_pass_the_budget_together_are_all_kept_whatever_the_batch_size(tmp_path):
    samples = _photos(tmp_path, 5)  # 560 MB decoded together; 112 MB each
    results = {}
    for batch_size in (5, 1):
        pipe = Pipeline(ops=[MeanRed(), BlueCorner()], batch_size=batch_size, max_decoded_bytes=250 << 20)
        results[batch_size] = _stats(pipe.process(samples))
        assert pipe.last_counts["rejected_records"] == []
    assert len(results[5]) == 5 and results[5] == results[1]
    assert [(red, blue) for _, red, blue in results[5]] == [(255, 255), (0, 0), (255, 0), (0, 255), (0, 0)]


def test_a_sample_whose_own_images_pass_the_budget_is_rejected_and_the_rest_kept(tmp_path):
    samples = _photos(tmp_path, 3)
    Image.new("RGB", (64, 64), "red").save(tmp_path / "small.png")
    samples[2]["images"] = [str(tmp_path / "big2.png"), str(tmp_path / "big0.png")]  # 224 MB alone
    samples.append({"text": "x", "images": [str(tmp_path / "small.png")]})
    pipe = Pipeline(ops=[MeanRed()], batch_size=4, max_decoded_bytes=150 << 20)
    kept = list(pipe.process(samples))
    rejected = pipe.last_counts["rejected_records"]
    assert [(r["code"], r["record"]["images"]) for r in rejected] == [("decode_budget", samples[2]["images"])]
    reason = rejected[0]["reason"]
    assert "max_decoded_bytes 150 MB" in reason and "raise it" in reason and "batch_size" not in reason
    assert sorted(s["__dj__stats__"]["mean_red"] for s in kept) == [0, 255, 255]


def test_clip_keeps_every_photo_of_a_batch_past_the_budget_with_the_scores_of_one_at_a_time(tmp_path):
    from pathlib import Path

    import numpy as np

    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    clip = str(Path(__file__).parent / "assets" / "models" / "tiny-clip")
    rng = np.random.default_rng(0)
    samples = []
    for k in range(6):  # photo-like: 1600x1200, ~13 MB decoded each, 80 MB together
        small = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
        Image.fromarray(small).resize((1600, 1200), Image.BICUBIC).save(tmp_path / f"p{k}.jpg", quality=90)
        samples.append({"text": f"<__dj__image> photo {k}", "images": [str(tmp_path / f"p{k}.jpg")]})
    scores = {}
    for batch_size, budget in ((6, 40 << 20), (1, 4 << 30)):
        pipe = Pipeline(ops=[ImageTextSimilarityFilter(hf_clip=clip, min_score=-1.0)], batch_size=batch_size,
                        max_decoded_bytes=budget)
        scores[batch_size] = [s["__dj__stats__"]["image_text_similarity"] for s in pipe.process(samples)]
        assert pipe.last_counts["rejected_records"] == []
    assert len(scores[6]) == 6 and np.allclose(scores[6], scores[1], atol=1e-6)
