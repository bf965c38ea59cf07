"""The image-only model filters as a Data-Juicer recipe names them: parameters, defaults, stat keys,
closed keep ranges, drop reasons with the threshold, and bad parameters refused at build (no model
is loaded here)."""
from __future__ import annotations

import pytest

from djx import DjxError, get_op_class
from djx.ops.filter.image_aesthetics_filter import ImageAestheticsFilter
from djx.ops.filter.image_nsfw_filter import ImageNSFWFilter
from djx.ops.filter.image_watermark_filter import ImageWatermarkFilter

# Data-Juicer 1.6.1's signatures (data_juicer/ops/filter/image_*_filter.py)
DJ = {
    "image_aesthetics_filter": ({"hf_scorer_model": "", "trust_remote_code": False, "min_score": 0.5,
                                 "max_score": 1.0, "any_or_all": "any"}, "image_aesthetics_scores"),
    "image_nsfw_filter": ({"hf_nsfw_model": "Falconsai/nsfw_image_detection", "trust_remote_code": False,
                           "min_score": 0.0, "max_score": 0.5, "any_or_all": "any"}, "image_nsfw_score"),
    "image_watermark_filter": ({"hf_watermark_model": "amrul-hzz/watermark_detector", "trust_remote_code": False,
                                "prob_threshold": 0.8, "any_or_all": "any"}, "image_watermark_prob"),
}


@pytest.mark.parametrize("name", sorted(DJ))
def test_data_juicers_parameters_defaults_and_stat_key(name):
    defaults, stat = DJ[name]
    op = get_op_class(name)()
    assert {k: getattr(op, k) for k in defaults} == defaults
    assert op.stats_keys == (stat,) and op.stat_shapes == {stat: "per_distinct_image"}
    assert not op.uses_text and op.uses_images


def test_the_aesthetics_default_is_data_juicers_scorer_divided_by_ten():
    op = ImageAestheticsFilter()
    assert op.spec.name == "shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE"
    assert op.spec.kind == "aesthetics_predictor" and op.by_ten
    assert not ImageAestheticsFilter(hf_scorer_model="my/own-scorer-v2-linear").by_ten  # raw output then


def test_keep_ranges_are_closed_and_any_or_all_applies():
    nsfw = ImageNSFWFilter(min_score=0.1, max_score=0.5)
    assert nsfw.keep({"image_nsfw_score": [0.1]}) and nsfw.keep({"image_nsfw_score": [0.5]})
    assert not nsfw.keep({"image_nsfw_score": [0.50001]})
    assert nsfw.keep({"image_nsfw_score": [0.9, 0.2]})
    assert not ImageNSFWFilter(any_or_all="all").keep({"image_nsfw_score": [0.9, 0.2]})
    assert nsfw.keep({"image_nsfw_score": []})  # no images: kept
    wm = ImageWatermarkFilter(prob_threshold=0.8)
    assert wm.keep({"image_watermark_prob": [0.8]}) and not wm.keep({"image_watermark_prob": [0.81]})


def test_drop_reasons_name_the_stat_its_values_and_the_threshold():
    assert ImageNSFWFilter().drop_reason({"image_nsfw_score": [0.93]}) == \
        "image_nsfw_score=[0.93] above max_score 0.5"
    assert ImageAestheticsFilter().drop_reason({"image_aesthetics_scores": [0.42]}) == \
        "image_aesthetics_scores=[0.42] below min_score 0.5"
    assert ImageWatermarkFilter(any_or_all="all").drop_reason({"image_watermark_prob": [0.1, 0.95]}) == \
        "image_watermark_prob=[0.1, 0.95] above prob_threshold 0.8 (any_or_all: all, and 1 of 2 miss)"


@pytest.mark.parametrize("make, message", [
    (lambda: ImageNSFWFilter(any_or_all="some"), "any_or_all"),
    (lambda: ImageNSFWFilter(min_score=0.9, max_score=0.5), "min_score 0.9 is above max_score 0.5"),
    (lambda: ImageWatermarkFilter(prob_threshold="high"), "prob_threshold"),
    (lambda: ImageAestheticsFilter(forward_batch_size=0), "forward_batch_size: must be >= 1"),
    (lambda: ImageAestheticsFilter(dtype="int8"), "dtype"),
])
def test_bad_parameters_are_refused_when_the_op_is_built(make, message):
    with pytest.raises(DjxError, match=message):
        make()
