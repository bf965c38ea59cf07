"""Decoded pixels are counted: a batch of small PNG files that each decode to 12000x12000 would
take gigabytes in one worker. Past `max_decoded_bytes` an image is rejected with code
decode_budget and a reason saying what to lower; the rest of the batch is kept."""
from __future__ import annotations

from PIL import Image

from djx import Batch, Filter, Pipeline


class MeanRed(Filter):
    """Reads every image's pixels, as a model filter does."""
    name = "mean_red_test_filter"
    uses_images = True
    stats_keys = ("mean_red",)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        reds = [batch.images.rgb(ref).getpixel((0, 0))[0] for ref in sample[batch.image_key]]
        batch.stats(sample)["mean_red"] = sum(reds) / len(reds)

    def keep(self, stats: dict) -> bool:
        return True


def test_images_past_the_decode_budget_are_rejected_and_the_rest_kept(tmp_path):
    for name, colour in (("big1.png", "white"), ("big2.png", "black")):
        Image.new("RGB", (4000, 4000), colour).save(tmp_path / name)  # ~50 KB each, 112 MB decoded
    Image.new("RGB", (64, 64), "red").save(tmp_path / "small.png")
    samples = [{"text": "x", "images": [str(tmp_path / n)]} for n in ("big1.png", "big2.png", "small.png")]
    pipe = Pipeline(ops=[MeanRed()], batch_size=3, max_decoded_bytes=150 << 20)
    kept = list(pipe.process(samples))
    rejected = pipe.last_counts["rejected_records"]
    assert [r["code"] for r in rejected] == ["decode_budget"]
    assert "max_decoded_bytes" in rejected[0]["reason"] and "batch_size" in rejected[0]["reason"]
    assert sorted(s["__dj__stats__"]["mean_red"] for s in kept) == [255, 255]
