"""Every range filter takes Data-Juicer 1.6's three switches (min_closed_interval, max_closed_interval,
reversed_range) and keeps what Data-Juicer 1.6.1 keeps, on values exactly at the bounds: a scalar
text stat, one value per image joined by any or all, and the shape filter's two tests per image.
The expected sets come from Data-Juicer itself (tests/assets/dj_fixtures/range_switches.json,
written by tools/dj_fixtures/range_switches.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from djx import Pipeline, RecipeError, build_op, get_op_class, registered_ops
from djx.core.op.range_filter import RangeFilter
from djx.core.run.provenance import op_fingerprint

ASSETS = Path(__file__).resolve().parent / "assets" / "dj_fixtures"
FIXTURE = json.loads((ASSETS / "range_switches.json").read_text(encoding="utf-8"))
TEXTS = [{"id": k, "text": v} for k, v in FIXTURE["texts"].items()]
IMAGES = [{"id": k, "text": "<__dj__image> a picture",
           "images": [str(ASSETS / "range_switches" / f"{n}.png") for n in names]}
          for k, names in FIXTURE["images"].items()]


def case_id(case: dict) -> str:
    return case["op"] + "-" + ",".join(f"{k}={v}" for k, v in case["params"].items())


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=case_id)
def test_djx_keeps_what_data_juicer_keeps_with_the_range_switches(case):
    samples = TEXTS if case["op"].startswith(("text", "average")) else IMAGES
    kept = Pipeline(ops=[build_op(case["op"], case["params"])]).process(samples)
    assert [s["id"] for s in kept] == case["kept"]


def test_the_fixture_was_written_by_data_juicer_and_sets_every_switch_on_each_kind_of_stat():
    assert FIXTURE["data_juicer"] == "1.6.1"
    for op in ("text_length_filter", "average_line_length_filter", "image_aspect_ratio_filter", "image_shape_filter"):
        switched = {k for c in FIXTURE["cases"] if c["op"] == op for k in c["params"] if "interval" in k or "range" in k}
        assert switched == {"min_closed_interval", "max_closed_interval", "reversed_range"}, op


def test_every_filter_data_juicer_tests_with_a_range_takes_the_switches():
    ranged = {"text_length_filter", "alphanumeric_filter", "character_repetition_filter", "special_characters_filter",
              "word_repetition_filter", "words_num_filter", "flagged_words_filter", "stopwords_filter",
              "token_num_filter", "average_line_length_filter", "maximum_line_length_filter",
              "language_id_score_filter", "perplexity_filter", "text_action_filter", "text_entity_dependency_filter",
              "image_aspect_ratio_filter", "image_shape_filter", "image_size_filter", "image_text_similarity_filter",
              "image_text_matching_filter", "image_pair_similarity_filter", "image_face_count_filter",
              "image_face_ratio_filter", "image_aesthetics_filter", "image_nsfw_filter", "image_watermark_filter",
              "phrase_grounding_recall_filter"}
    assert ranged <= set(registered_ops())
    assert {name for name in ranged if not issubclass(get_op_class(name), RangeFilter)} == set()


def test_a_dropped_sample_says_which_values_the_switches_keep():
    op = build_op("text_length_filter", {"min_len": 10, "max_len": 100, "reversed_range": True})
    (dropped,) = Pipeline(ops=[op]).results([{"text": "x" * 50}])
    assert (dropped.outcome, dropped.reason) == ("dropped", "text_len=50 not in (-inf, 10] or [100, inf)")
    op = build_op("image_aspect_ratio_filter", {"max_ratio": 2.0, "max_closed_interval": False, "any_or_all": "all"})
    assert op.drop_reason({"aspect_ratios": [2.0, 1.0]}) == "aspect_ratios=[2, 1] not in [0.333, 2) (any_or_all: all)"
    op = build_op("language_id_score_filter", {"min_score": 0.8, "reversed_range": True, "lang": "en"})
    assert op.drop_reason({"lang": "en", "lang_score": 0.9}) == "lang_score=0.9 not in (-inf, 0.8]"


def test_switches_choose_the_verdict_only_so_stats_are_reused_across_them():
    plain = build_op("text_length_filter", {"min_len": 10})
    switched = build_op("text_length_filter", {"min_len": 20, "reversed_range": True, "min_closed_interval": False})
    assert op_fingerprint(plain) == op_fingerprint(switched)


def test_a_switch_is_a_boolean_and_a_filter_without_a_range_does_not_take_it():
    with pytest.raises(RecipeError, match="reversed_range: expected bool"):
        build_op("text_length_filter", {"reversed_range": "yes"})
    with pytest.raises(RecipeError, match="unknown parameter 'reversed_range'"):
        build_op("document_deduplicator", {"reversed_range": True})


def test_the_analysis_draws_no_bound_for_a_reversed_range_and_explain_shows_the_switches_as_set():
    from djx.analyze.explain import _thresholds
    from djx.analyze.thresholds import filters_from_ops
    plain = build_op("text_length_filter", {"min_len": 10, "max_len": 100})
    reversed_ = build_op("text_length_filter", {"min_len": 10, "max_len": 100, "reversed_range": True})
    (info_plain, info_reversed) = filters_from_ops([plain, reversed_])
    assert [t.param for t in info_plain.thresholds] == ["max_len", "min_len"] and info_reversed.thresholds == ()
    assert _thresholds(reversed_) == "min_len 10, max_len 100, reversed_range True"
    assert _thresholds(plain) == "min_len 10, max_len 100"
