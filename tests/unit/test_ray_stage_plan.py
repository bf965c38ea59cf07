"""How a Ray run cuts its op chain into stages (no Ray started: the plan comes from the ops, the
plan's model sizes and the largest node's memory): the whole chain in one stage, as a local worker
runs it, unless scoring apart splits its model ops or its one actor would not fit a node."""
from __future__ import annotations

import pytest

from djx import Pipeline
from djx.core.errors import DjxError
from djx.core.executors.ray.stage_plan import (ACTOR_BASE_BYTES, DECODE_BYTES_PER_SAMPLE, actor_need, fitted,
                                               ray_stages, stage_groups)
from conftest import REPO_DIR

MODELS = REPO_DIR / "tests" / "assets" / "models"
CLIP = {"image_text_similarity_filter": {"hf_clip": str(MODELS / "tiny-clip"), "min_score": 0.2}}
BLIP = {"image_text_matching_filter": {"hf_blip": str(MODELS / "tiny-blip-itm"), "min_score": 0.5}}
AESTHETICS = {"image_aesthetics_filter": {"hf_scorer_model": str(MODELS / "tiny-aesthetics-predictor-v2-linear")}}
LENGTH = {"text_length_filter": {"min_len": 10}}
GiB = 1 << 30


def ops_of(tmp_path, process: list, scoring: str = "workers") -> list:
    return Pipeline(dataset_path=str(tmp_path / "d.jsonl"), export_path=str(tmp_path / "o.jsonl"),
                    executor="ray", scoring=scoring, process=process).ops


def sizes(ops: list, gib: float) -> dict:
    """Every model of `ops` the size of `gib` GiB, as the plan estimates them."""
    return {spec.label(): int(gib * GiB) for op in ops for spec in op.model_specs()}


def names(ops: list, groups: list) -> list:
    return [[op.name for op in ops[first:last]] for first, last, _ in groups]


def test_the_whole_chain_is_one_stage_whose_actor_holds_every_model(tmp_path):
    ops = ops_of(tmp_path, [LENGTH, CLIP, AESTHETICS, BLIP])
    groups = ray_stages(ops, scoring_device=False)
    assert names(ops, groups) == [[op.name for op in ops]]
    assert groups[0][2] == frozenset(spec for op in ops for spec in op.model_specs())
    assert len(groups[0][2]) == 3
    # it fits a node with room for the three models: kept whole
    assert fitted(ops, groups, sizes(ops, 1), 32, node_memory=8 * GiB) == groups


def test_a_chain_whose_one_actor_would_not_fit_a_node_is_cut_by_models(tmp_path):
    ops = ops_of(tmp_path, [LENGTH, CLIP, BLIP])
    model_bytes = sizes(ops, 2)  # 4 GiB of weights in all, 2 GiB a model
    node = 3 * GiB  # a model's actor fits (2 GiB + 256 MiB + a batch's images), both models' does not
    groups = fitted(ops, ray_stages(ops, False), model_bytes, 32, node)
    assert names(ops, groups) == [["text_length_filter"], ["image_text_similarity_filter"],
                                  ["image_text_matching_filter"]]
    for first, last, specs in groups:
        assert actor_need(ops[first:last], specs, model_bytes, 32, node) <= node
    # an actor that prepares only (scoring: device) holds no weights: the whole chain fits
    assert len(fitted(ops, ray_stages(ops, False), model_bytes, 32, node, scored=True)) == 1


def test_a_model_no_node_can_hold_is_refused_in_words(tmp_path):
    ops = ops_of(tmp_path, [LENGTH, CLIP])
    model_bytes = sizes(ops, 4)
    groups = fitted(ops, ray_stages(ops, False), model_bytes, 32, 2 * GiB)
    assert names(ops, groups) == [["text_length_filter"], ["image_text_similarity_filter"]]
    with pytest.raises(DjxError, match=r"a ray actor for image_text_similarity_filter needs about 4\.38 GiB .* "
                                       r"largest node offers 2\.00 GiB"):
        actor_need(ops[1:2], groups[1][2], model_bytes, 32, 2 * GiB)
    assert actor_need(ops[:1], groups[0][2], model_bytes, 32, 2 * GiB) == \
        ACTOR_BASE_BYTES + 32 * DECODE_BYTES_PER_SAMPLE


def test_under_scoring_device_model_ops_of_both_kinds_keep_their_own_stages(tmp_path):
    # CLIP and BLIP score apart (their stages prepare only), the aesthetics model does not
    mixed = ops_of(tmp_path, [LENGTH, CLIP, AESTHETICS, BLIP], scoring="device")
    assert ray_stages(mixed, scoring_device=True) == stage_groups(mixed)
    assert len(stage_groups(mixed)) == 4
    # every model op scores apart, or none does: one stage
    for process in ([LENGTH, CLIP, BLIP], [LENGTH, AESTHETICS]):
        ops = ops_of(tmp_path, process, scoring="device")
        assert names(ops, ray_stages(ops, scoring_device=True)) == [[op.name for op in ops]]
