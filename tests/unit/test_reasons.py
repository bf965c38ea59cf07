"""Drop reasons a person can act on: the stat, its value and the threshold it missed; a plug-in
filter without its own account gets its stats listed, and a broken account never costs the verdict."""
from __future__ import annotations

import sys

import pytest

from djx import Filter, range_reason
from djx.core.errors import UsageError
from djx.core.op.reasons import default_reason
from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
from djx.ops.filter.image_shape_filter import ImageShapeFilter
from djx.ops.filter.image_size_filter import ImageSizeFilter
from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
from djx.ops.filter.text_length_filter import TextLengthFilter


class PluginFilter(Filter):
    """A plug-in filter with two stats and no drop_reason of its own."""

    stats_keys = ("score", "votes")

    def compute_sample(self, sample, batch):
        return {"score": 0.5, "votes": 1}

    def keep(self, stats):
        return False


class ExplainingFilter(Filter):
    stats_keys = ("score",)

    def __init__(self, account=None, **common):
        super().__init__(**common)
        self.account = account

    def compute_sample(self, sample, batch):
        return {"score": 0.5}

    def keep(self, stats):
        return False

    def drop_reason(self, stats):
        return self.account(stats)


def test_builtin_filters_name_the_stat_its_value_and_the_bound_missed():
    assert TextLengthFilter(min_len=5).drop_reason({"text_len": 2}) == "text_len=2 below min_len 5"
    assert TextLengthFilter(min_len=1, max_len=8).drop_reason({"text_len": 20}) == "text_len=20 above max_len 8"
    assert ImageShapeFilter(min_width=32, min_height=32).drop_reason(
        {"image_width": [16, 64], "image_height": [16, 64]}) == \
        "image_width=[16, 64] below min_width 32; image_height=[16, 64] below min_height 32"
    assert ImageAspectRatioFilter(max_ratio=2.0).drop_reason({"aspect_ratios": [3.2]}) == \
        "aspect_ratios=[3.2] above max_ratio 2"


def test_a_size_bound_is_shown_as_the_user_wrote_it():
    reason = ImageSizeFilter(min_size="70B").drop_reason({"image_sizes": [60]})
    assert reason.startswith("image_sizes=[60] below min_size 70B (70 bytes)")


def test_model_filters_name_their_score_and_threshold():
    clip = ImageTextSimilarityFilter(hf_clip="unused", min_score=0.2)
    assert clip.drop_reason({"image_text_similarity": [0.0397]}) == "image_text_similarity=[0.0397] below min_score 0.2"
    blip = ImageTextMatchingFilter(hf_blip="unused", min_score=0.5, max_score=0.9, any_or_all="all")
    assert blip.drop_reason({"image_text_matching_score": [0.7, 0.95, 0.1]}) == (
        "image_text_matching_score=[0.7, 0.95, 0.1] below min_score 0.5 and above max_score 0.9 "
        "(any_or_all: all, and 2 of 3 miss)")


def test_range_reasons_give_four_significant_digits_and_an_open_bound_as_none():
    assert range_reason("score", 0.123456, 0.5, sys.maxsize, "min_score", "max_score") == \
        "score=0.1235 below min_score 0.5"
    assert range_reason("score", 7, 1, 5, "min_score", "max_score", shown=("1 point", "5 points")) == \
        "score=7 above max_score 5 points"
    # a value inside the range (an op dropped it for another cause) still names the range
    assert range_reason("score", 3, 1, sys.maxsize, "min_score", "max_score") == "score=3 outside [1, none]"


def test_a_filter_without_an_account_gets_its_stats_listed():
    op = PluginFilter()
    assert default_reason(op, {"score": 0.123456, "votes": [1, 2]}) == \
        "score=0.1235, votes=[1, 2] outside the kept range"
    assert default_reason(op, {"score": float("nan")}) == "score=nan, votes=None outside the kept range"


def test_the_filters_own_account_is_used_and_a_broken_one_falls_back_to_the_stats():
    assert default_reason(ExplainingFilter(account=lambda s: f"score {s['score']} too low"), {"score": 1}) == \
        "score 1 too low"
    for broken in (lambda s: 1 / 0, lambda s: "", lambda s: None):
        assert default_reason(ExplainingFilter(account=broken), {"score": 1}) == "score=1 outside the kept range"


def test_a_filter_without_stats_is_refused_when_made_so_no_drop_goes_unexplained():
    class Bare(Filter):
        def compute_sample(self, sample, batch):
            return {}

        def keep(self, stats):
            return False

    with pytest.raises(UsageError, match=r"Bare names no stats: .*stats_keys"):
        Bare()


def test_a_value_just_past_its_bound_reads_apart_from_it():
    from djx.core.op.reasons import range_reason
    near = range_reason("image_text_similarity", [0.23620855, 0.9], 0.2362086, 1.0, "min_score", "max_score")
    assert near == "image_text_similarity=[0.2362085, 0.9] below min_score 0.2362086"
    assert range_reason("image_text_similarity", [0.0397], 0.2, 1.0, "min_score", "max_score") == \
        "image_text_similarity=[0.0397] below min_score 0.2"  # 4 digits where they are enough
    assert range_reason("text_len", 4, 5, 100, "min_len", "max_len") == "text_len=4 below min_len 5"


def test_under_reversed_range_a_value_near_a_bound_reads_apart_from_it():
    from djx.core.op.registry import build_op, load_builtin_ops
    load_builtin_ops()
    op = build_op("text_length_filter", {"min_len": 5, "max_len": 9, "reversed_range": True})
    assert op.range_reason("s", 0.23620861, 0.2362086, 0.9, "min_score", "max_score") == \
        "s=0.23620861 not in (-inf, 0.2362086] or [0.9, inf)"
    assert op.range_reason("s", 0.5, 0.1, 0.9, "min_score", "max_score") == "s=0.5 not in (-inf, 0.1] or [0.9, inf)"
