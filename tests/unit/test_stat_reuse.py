"""A filter reuses the stats a sample already carries (re-filtering an export computes nothing and
loads no model) only when every one of them is there and valid; anything doubtful is recomputed."""
from __future__ import annotations

import pytest

from djx import Mapper, RunContext
from djx.core.run.stat_reuse import reusable
from djx.ops.filter.image_nsfw_filter import ImageNSFWFilter
from djx.ops.filter.image_shape_filter import ImageShapeFilter
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
from djx.ops.filter.text_length_filter import TextLengthFilter

CTX = RunContext()
IMG, EOC = CTX.image_special_token, CTX.eoc_special_token


def sample(stats, **fields) -> dict:
    return {"text": "some text", "images": [], "__dj__stats__": stats, **fields}


def test_valid_stats_are_reused():
    assert reusable(TextLengthFilter(), sample({"text_len": 9}), CTX)
    assert reusable(TextLengthFilter(), sample({"text_len": 9.0, "other_op_stat": "anything"}), CTX)


@pytest.mark.parametrize("value", [None, "9", True, float("nan"), float("inf"), [9]],
                         ids=["null", "string", "bool", "nan", "inf", "list for a scalar"])
def test_a_stat_that_is_not_a_finite_number_is_recomputed(value):
    assert not reusable(TextLengthFilter(), sample({"text_len": value}), CTX)


def test_missing_stats_are_recomputed():
    assert not reusable(TextLengthFilter(), sample({}), CTX)
    assert not reusable(TextLengthFilter(), {"text": "no stats at all"}, CTX)
    assert not reusable(TextLengthFilter(), sample("not a dict"), CTX)
    assert not reusable(ImageShapeFilter(), sample({"image_width": [5]}, images=["a.png"]), CTX)  # height missing


def test_recompute_stats_recomputes_everything():
    assert not reusable(TextLengthFilter(), sample({"text_len": 9}), CTX.with_(recompute_stats=True))


def test_only_filters_reuse_stats():
    class Shout(Mapper):
        stats_keys = ("text_len",)

        def process(self, batch):
            pass

    assert not reusable(Shout(), sample({"text_len": 9}), CTX)


def test_per_image_stats_need_one_value_per_image():
    op = ImageShapeFilter()
    two = ["a.png", "b.png"]
    assert reusable(op, sample({"image_width": [5, 6], "image_height": [7, 8]}, images=two), CTX)
    assert not reusable(op, sample({"image_width": [5], "image_height": [7]}, images=two), CTX)
    assert not reusable(op, sample({"image_width": [5, 6], "image_height": [7, 8]}, images="a.png"), CTX)
    assert reusable(op, sample({"image_width": [], "image_height": []}, images=[]), CTX)


def test_image_model_stats_need_one_value_per_distinct_image():
    """Data-Juicer scores a path listed twice once: the stats djx wrote before it did (one value per
    listing) are recomputed, not reused."""
    op = ImageNSFWFilter()
    twice = ["a.png", "b.png", "a.png"]
    assert reusable(op, sample({"image_nsfw_score": [0.1, 0.2]}, images=twice), CTX)
    assert not reusable(op, sample({"image_nsfw_score": [0.1, 0.2, 0.1]}, images=twice), CTX)
    assert not reusable(op, sample({"image_nsfw_score": [0.1]}, images=[["a.png"]]), CTX)  # unhashable


def test_per_chunk_stats_need_one_value_per_chunk_that_holds_images():
    op = ImageTextSimilarityFilter(hf_clip="unused")
    text = f"{IMG} a cat {EOC} no image here {EOC} {IMG} a dog"
    two_chunks = sample({"image_text_similarity": [0.3, 0.2]}, text=text, images=["cat.png", "dog.png"])
    assert reusable(op, two_chunks, CTX)
    assert not reusable(op, {**two_chunks, "__dj__stats__": {"image_text_similarity": [0.3]}}, CTX)
    # tokens that do not match the images: the op must see the sample (and reject it, saying why)
    assert not reusable(op, {**two_chunks, "images": ["cat.png"]}, CTX)
