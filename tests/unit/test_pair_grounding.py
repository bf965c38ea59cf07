"""image_pair_similarity_filter and phrase_grounding_recall_filter without a model: Data-Juicer's
noun phrases, the recall of one image's detections, the verdicts and their reasons, and NLTK data
that is missing failing at load with what to provide."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from djx import RecipeError, build_op
from djx.ops.common.grounding import image_recall, noun_phrases
from djx.ops.filter.image_pair_similarity_filter import ImagePairSimilarityFilter
from djx.ops.filter.phrase_grounding_recall_filter import PhraseGroundingRecallFilter

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nltk") is None,
                                reason="nltk is not installed (pip install -e '.[test,grounding]' runs these tests)")
NLTK_DATA = str(Path(__file__).resolve().parents[1] / "assets" / "nltk_data")


@pytest.mark.slow  # the first import of nltk takes about a second
def test_noun_phrases_are_data_juicers_determiner_adjectives_nouns_lower_cased_and_distinct():
    assert noun_phrases("A Red Circle on a white background", NLTK_DATA) == ["a red circle", "a white background"]
    assert noun_phrases("a red circle, a red circle and a blue square.", NLTK_DATA) == [
        "a red circle", "a blue square"]  # punctuation is no phrase; a repeated phrase counts once
    assert noun_phrases("very bright.", NLTK_DATA) == []
    assert noun_phrases("", NLTK_DATA) == []


def boxes_and_logits(boxes: list[tuple[float, float, float, float]], labels: list[int], scores: list[float],
                     n_phrases: int):
    """Detections as OWL-ViT gives them: boxes as centre x, y, width, height in [0, 1], and logits
    whose best phrase is `labels[i]` with sigmoid score `scores[i]`."""
    logits = torch.full((len(boxes), n_phrases), -20.0)
    for i, (label, score) in enumerate(zip(labels, scores)):
        logits[i, label] = torch.logit(torch.tensor(score))
    return logits, torch.tensor(boxes)


def recall(boxes, labels, scores, n, conf_thr=0.0, iou_thr=0.5, large_area_ratio_thr=0.95):
    logits, b = boxes_and_logits(boxes, labels, scores, n)
    return image_recall(logits, b, (200, 100), n, conf_thr, iou_thr, large_area_ratio_thr)


def test_recall_counts_each_phrase_once_among_the_best_boxes():
    apart = [(0.1, 0.1, 0.1, 0.1), (0.5, 0.5, 0.1, 0.1), (0.9, 0.9, 0.1, 0.1)]
    assert recall(apart, [0, 1, 2], [0.9, 0.8, 0.7], 3) == 1.0
    assert recall(apart, [0, 0, 1], [0.9, 0.8, 0.7], 3) == pytest.approx(2 / 3)  # phrase 0 twice
    assert recall(apart, [0, 1, 1], [0.9, 0.8, 0.7], 2) == 1.0  # 2 phrases: the best 2 boxes
    assert recall(apart, [0, 0, 1], [0.9, 0.8, 0.7], 2) == 0.5  # phrase 1's box is not among the best 2


def test_recall_passes_over_a_box_covering_the_image_an_overlapping_one_and_low_confidence():
    whole, box, near, far = (0.5, 0.5, 1.0, 1.0), (0.3, 0.3, 0.2, 0.2), (0.31, 0.31, 0.2, 0.2), (0.8, 0.8, 0.1, 0.1)
    assert recall([whole, far], [0, 1], [0.9, 0.8], 2) == 0.5
    assert recall([whole, far], [0, 1], [0.9, 0.8], 2, large_area_ratio_thr=1.0) == 1.0
    assert recall([box, near, far], [0, 1, 2], [0.9, 0.8, 0.7], 3) == pytest.approx(2 / 3)
    assert recall([box, near, far], [0, 1, 2], [0.9, 0.8, 0.7], 3, iou_thr=0.95) == 1.0
    assert recall([box, far], [0, 1], [0.9, 0.4], 2, conf_thr=0.5) == 0.5


def test_verdicts_and_drop_reasons_name_the_stat_its_value_and_the_threshold():
    grounding = PhraseGroundingRecallFilter(nltk_data=NLTK_DATA, min_recall=0.5)
    assert grounding.keep({"phrase_grounding_recall": [0.25, 0.5]})
    assert not grounding.keep({"phrase_grounding_recall": [0.25]})
    assert grounding.drop_reason({"phrase_grounding_recall": [0.25]}) == \
        "phrase_grounding_recall=[0.25] below min_recall 0.5"
    assert grounding.keep({"phrase_grounding_recall": []})  # no images: kept, as in Data-Juicer
    every = PhraseGroundingRecallFilter(nltk_data=NLTK_DATA, min_recall=0.5, any_or_all="all")
    assert not every.keep({"phrase_grounding_recall": [0.25, 0.5]})
    assert "any_or_all: all" in every.drop_reason({"phrase_grounding_recall": [0.25, 0.5]})
    pair = ImagePairSimilarityFilter(min_score=0.3, max_score=0.9)
    assert pair.keep({"image_pair_similarity": [0.5]}) and not pair.keep({"image_pair_similarity": [0.95]})
    assert pair.drop_reason({"image_pair_similarity": [0.05]}) == "image_pair_similarity=[0.05] below min_score 0.3"


def test_data_juicers_parameters_and_defaults():
    pair = ImagePairSimilarityFilter()
    assert (pair.hf_clip, pair.min_score, pair.max_score, pair.any_or_all) == (
        "openai/clip-vit-base-patch32", 0.1, 1.0, "any")
    g = PhraseGroundingRecallFilter(nltk_data=NLTK_DATA)
    assert (g.hf_owlvit, g.min_recall, g.max_recall, g.reduce_mode, g.iou_thr, g.large_area_ratio_thr, g.conf_thr) \
        == ("google/owlvit-base-patch32", 0.1, 1.0, "avg", 0.5, 0.95, 0.0)
    assert pair.spec == build_op("image_text_similarity_filter", {}).spec  # one CLIP copy for both ops


def test_bad_parameters_are_refused_at_load():
    with pytest.raises(RecipeError, match="min_score"):
        ImagePairSimilarityFilter(min_score=-0.5)  # Data-Juicer's ClosedUnitInterval
    with pytest.raises(RecipeError, match="forward_batch_size"):
        PhraseGroundingRecallFilter(nltk_data=NLTK_DATA, forward_batch_size=0)
    with pytest.raises(Exception, match="reduce_mode"):
        PhraseGroundingRecallFilter(nltk_data=NLTK_DATA, reduce_mode="median")


def test_missing_nltk_data_fails_at_load_naming_what_to_provide(tmp_path, monkeypatch):
    with pytest.raises(RecipeError, match="punkt_tab.*averaged_perceptron_tagger_eng.*nltk_data"):
        build_op("phrase_grounding_recall_filter", {"nltk_data": str(tmp_path)})
    import nltk.data
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(RecipeError, match="NLTK_DATA"):
        build_op("phrase_grounding_recall_filter", {})
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), NLTK_DATA])  # as NLTK_DATA would add it
    assert build_op("phrase_grounding_recall_filter", {}).nltk_folder == NLTK_DATA
