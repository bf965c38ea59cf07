"""Which Ray stages prepare only under `scoring: device`, the GPU share their scoring actors ask,
and the plan's line on it (no Ray started: the stages come from the op chain alone)."""
from __future__ import annotations

from djx import Pipeline
from djx.core.executors.ray.scorers import RayScorers, describe, prepare_only_stages
from djx.core.executors.ray.stage_plan import stage_groups
from conftest import REPO_DIR

MODELS = REPO_DIR / "tests" / "assets" / "models"
CLIP = {"image_text_similarity_filter": {"hf_clip": str(MODELS / "tiny-clip"), "min_score": 0.2}}
BLIP = {"image_text_matching_filter": {"hf_blip": str(MODELS / "tiny-blip-itm"), "min_score": 0.5}}
AESTHETICS = {"image_aesthetics_filter": {"hf_scorer_model": str(MODELS / "tiny-aesthetics-predictor-v2-linear")}}


def ops_of(tmp_path, process: list) -> list:
    return Pipeline(dataset_path=str(tmp_path / "d.jsonl"), export_path=str(tmp_path / "o.jsonl"),
                    executor="ray", scoring="device", process=process).ops


def test_only_stages_whose_model_ops_all_take_part_prepare_only(tmp_path):
    ops = ops_of(tmp_path, [{"text_length_filter": {"min_len": 10}}, CLIP, AESTHETICS, BLIP])
    groups = stage_groups(ops)
    assert [ops[groups[s][0]].name for s in sorted(prepare_only_stages(ops, groups))] == \
        ["image_text_similarity_filter", "image_text_matching_filter"]
    # two of the three model stages score in the scoring actors: they ask two thirds of each GPU,
    # the aesthetics stage's actors keep their third
    assert RayScorers(ops, groups, 1, (), ".").gpu_share == 0.6666
    line = describe(ops, groups)
    assert "stage actors prepare on CPUs" in line and "image_aesthetics_filter score in their stage actors" in line


def test_scoring_actors_ask_whole_gpus_when_every_model_stage_is_scored_there(tmp_path):
    ops = ops_of(tmp_path, [CLIP, BLIP])
    groups = stage_groups(ops)
    assert RayScorers(ops, groups, 1, (), ".").gpu_share == 1.0
    assert "score in their stage actors" not in describe(ops, groups)


def test_a_recipe_with_no_op_that_can_score_apart_says_so(tmp_path):
    ops = ops_of(tmp_path, [AESTHETICS])
    groups = stage_groups(ops)
    assert not prepare_only_stages(ops, groups)
    assert "no model op of this recipe can score apart" in describe(ops, groups)
