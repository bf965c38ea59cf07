"""Deduplicators over a djx export run again: a hash the export carries is reused only when djx
vouches for it for this very op (same parameters, images unchanged); otherwise it is computed anew
(a deduplicator keeps a hash it finds, so a stale one would have decided the groups and been signed
as the new op's). Two MinHash deduplicators with other parameters in one recipe are refused: djx
keeps one signature per sample, where Data-Juicer computes each op's anew."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml
from PIL import Image

from djx import Pipeline
from djx.core.errors import RecipeError

from helpers import read_jsonl_file

pytestmark = pytest.mark.slow


def run(tmp_path, name: str, data, process: list[dict]) -> list:
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(tmp_path / name / "kept.jsonl"),
                                      "np": 1, "start_method": "fork", "process": process}))
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"], summary
    return [r["id"] for r in read_jsonl_file(tmp_path / name / "kept.jsonl")]


def test_an_export_run_again_with_other_parameters_is_hashed_anew(tmp_path):
    texts = ["Hello World, this is a test.", "hello world, this is a test.", "HELLO WORLD this is a test",
             "something else entirely"]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    assert run(tmp_path, "first", data, [{"document_deduplicator": {}}]) == [0, 1, 2, 3]
    loose = {"document_deduplicator": {"lowercase": True, "ignore_non_character": True}}
    assert run(tmp_path, "again", tmp_path / "first" / "kept.jsonl", [loose]) == [0, 3]
    assert run(tmp_path, "fresh", data, [loose]) == [0, 3]


def test_an_image_changed_since_the_export_is_hashed_anew(tmp_path):
    (tmp_path / "img").mkdir()
    Image.effect_noise((64, 64), 80).convert("RGB").save(tmp_path / "img" / "a.png")
    Image.linear_gradient("L").convert("RGB").save(tmp_path / "img" / "b.png")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"t{i}", "images": [str(tmp_path / "img" / f)]}) + "\n"
                            for i, f in enumerate(["a.png", "b.png"])))
    phash = [{"image_deduplicator": {"method": "phash"}}]
    assert run(tmp_path, "first", data, phash) == [0, 1]
    shutil.copy(tmp_path / "img" / "a.png", tmp_path / "img" / "b.png")  # b is now a's picture
    os.utime(tmp_path / "img" / "b.png", ns=(1, 1))
    assert run(tmp_path, "again", tmp_path / "first" / "kept.jsonl", phash) == [0]


def test_two_minhash_deduplicators_with_other_parameters_are_refused(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": "one two three four five six"}) + "\n")
    recipe = {"dataset_path": str(data), "export_path": str(tmp_path / "o.jsonl"),
              "process": [{"document_minhash_deduplicator": {"jaccard_threshold": 0.9}},
                          {"ray_bts_minhash_deduplicator": {"jaccard_threshold": 0.5}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    with pytest.raises(RecipeError, match="with other signature parameters: djx keeps one __dj__minhash"):
        Pipeline.from_recipe(str(tmp_path / "r.yaml"))
    recipe["process"][1] = {"document_minhash_deduplicator": {"jaccard_threshold": 0.9}}  # the same: fine
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    Pipeline.from_recipe(str(tmp_path / "r.yaml"))
