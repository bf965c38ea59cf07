"""What the built-in CPU filters compute and keep: closed intervals, any_or_all over a sample's images,
Data-Juicer's size units, empty stats for a sample without images, and a missing or broken image
rejecting its sample with the file named. Run in this process through Pipeline.process."""
from __future__ import annotations

import pytest

from djx import STATS_KEY, Pipeline
from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
from djx.ops.filter.image_shape_filter import ImageShapeFilter
from djx.ops.filter.image_size_filter import ImageSizeFilter
from djx.ops.filter.text_length_filter import TextLengthFilter


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


def test_image_size_filter_rejects_what_is_no_image_file_with_the_reason(tmp_path):
    """The size filter reads no pixels, but a folder, a FIFO, a URL or a missing file is no image
    file: rejected (bad_image) with what it is, as every image op says it, never a size."""
    import os
    (tmp_path / "folder.jpg").mkdir()
    os.mkfifo(tmp_path / "pipe.jpg")
    refs = [str(tmp_path / "folder.jpg"), str(tmp_path / "pipe.jpg"), "https://example.com/a.jpg",
            str(tmp_path / "gone.jpg")]
    pipe = Pipeline(ops=[ImageSizeFilter(min_size=0)])
    assert list(pipe.process([{"text": "", "images": [r]} for r in refs])) == []
    rejected = pipe.last_counts["rejected_records"]
    assert [r["code"] for r in rejected] == ["bad_image"] * 4
    for said, expected in zip([r["reason"] for r in rejected], ["is a folder", "is a FIFO", "a URL", "file not found"]):
        assert expected in said, said
