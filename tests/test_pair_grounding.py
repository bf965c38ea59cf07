"""image_pair_similarity_filter and phrase_grounding_recall_filter on the shipped tiny CLIP and tiny
OWL-ViT: Data-Juicer 1.6.1's own numbers (tests/assets/dj_fixtures/pair_grounding.json, written by
tools/dj_fixtures/pair_grounding.py), its pairing of chunks and images, samples it cannot score
rejected with their reason, one CLIP copy shared with image_text_similarity_filter, and a base
install without nltk told what to install."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from djx import Pipeline
from djx.core.recipe.recipe import recipe_from_dict
from djx.ops.filter.image_pair_similarity_filter import ImagePairSimilarityFilter
from djx.ops.filter.phrase_grounding_recall_filter import PhraseGroundingRecallFilter

from conftest import read_jsonl_file

pytestmark = [pytest.mark.slow, pytest.mark.models]
needs_nltk = pytest.mark.skipif(importlib.util.find_spec("nltk") is None,
                                reason="nltk is not installed (pip install -e '.[test,grounding]' runs this test)")

REPO = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((REPO / "tests" / "assets" / "dj_fixtures" / "pair_grounding.json").read_text())
NLTK_DATA = str(REPO / "tests" / "assets" / "nltk_data")
CLIP = str(REPO / "tests" / "assets" / "models" / "tiny-clip")
OWLVIT = str(REPO / "tests" / "assets" / "models" / "tiny-owlvit")
IMG, EOC = "<__dj__image>", "<|__dj__eoc|>"


def run_op(op, records, batch_size=8):
    """{id: stats} of the records `op` keeps, and the pipeline (its counts name the rejected)."""
    samples = [{**r, "images": [str(REPO / p) for p in r["images"]]} for r in records]
    pipe = Pipeline(ops=[op], dataset_path=str(REPO / "d.jsonl"), batch_size=batch_size)
    return {s["id"]: s["__dj__stats__"] for s in pipe.process(samples)}, pipe


def grounding_op(params: dict, **extra) -> PhraseGroundingRecallFilter:
    return PhraseGroundingRecallFilter(**{**params, "hf_owlvit": OWLVIT}, nltk_data=NLTK_DATA, **extra)


def runs(op: str) -> list[dict]:
    return [r for r in FIXTURE["runs"] if r["op"] == op]


def run_recipe(tmp_path, records, process, text="", **keys) -> tuple[dict, list, list]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": r["id"], "text": text or r["text"],
                                        "images": [str(REPO / p) for p in r["images"]]}) + "\n" for r in records))
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / "o/o.jsonl"), "np": 1,
                               "batch_size": 5, "process": process, **keys}, str(tmp_path))
    summary = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    return summary, read_jsonl_file(tmp_path / "o/o.jsonl"), read_jsonl_file(tmp_path / "o/o.dropped.jsonl")


def test_image_pair_similarity_and_verdicts_equal_data_juicers(tmp_path):
    (run,) = runs("image_pair_similarity_filter")
    _, kept, dropped = run_recipe(tmp_path, run["records"],
                                  [{"image_pair_similarity_filter": {**run["params"], "hf_clip": CLIP}}])
    assert {k["id"] for k in kept} == {r["id"] for r in run["records"] if r["keep"]}
    assert len(kept) >= 6 and len(dropped) >= 6  # some cosines are below 0
    stats = {s["id"]: s["__dj__stats__"]["image_pair_similarity"] for s in kept + dropped}
    for record in run["records"]:
        assert stats[record["id"]] == pytest.approx(record["stats"]["image_pair_similarity"], abs=1e-5)


def test_a_sample_without_two_distinct_images_is_rejected_where_data_juicer_raises():
    assert all(e["error"] == "ValueError: Each sample must include two images." for e in FIXTURE["pair_errors"])
    records = [{"id": f"e{k}", "text": "", "images": e["images"]} for k, e in enumerate(FIXTURE["pair_errors"])]
    stats, pipe = run_op(ImagePairSimilarityFilter(hf_clip=CLIP, min_score=0.0), records)
    assert stats == {}
    rejected = pipe.last_counts["rejected_records"]
    assert [r["code"] for r in rejected] == ["image_count"] * 4
    assert [r["reason"].split(", got ")[-1] for r in rejected[:3]] == ["0", "1", "3"]
    assert "two different images" in rejected[3]["reason"]


@needs_nltk
@pytest.mark.parametrize("k", range(len(runs("phrase_grounding_recall_filter"))))
def test_phrase_grounding_recall_equals_data_juicers(k):
    run = runs("phrase_grounding_recall_filter")[k]
    stats, pipe = run_op(grounding_op(run["params"], data_juicer_image_offset=True), run["records"])
    assert not pipe.last_counts.get("rejected_records")
    assert set(stats) == {r["id"] for r in run["records"]}
    for record in run["records"]:
        assert stats[record["id"]]["phrase_grounding_recall"] == pytest.approx(
            record["stats"]["phrase_grounding_recall"], abs=1e-5), record["id"]


@needs_nltk
def test_each_chunk_is_scored_with_its_own_images_after_a_chunk_without_noun_phrases():
    """Data-Juicer pairs the chunk after one without noun phrases with the earlier chunk's image;
    djx (by default) with its own, as if the chunk stood alone."""
    run = runs("phrase_grounding_recall_filter")[0]
    (record,) = [r for r in run["records"] if r["text"].startswith(f"{IMG} very bright. {EOC}")]
    second = record["text"].split(EOC)[1]
    alone = [{"id": "first-image", "text": second, "images": record["images"][:1]},
             {"id": "own-image", "text": second, "images": record["images"][1:]}]
    stats, _ = run_op(grounding_op(run["params"]), [record] + alone)
    assert stats[record["id"]]["phrase_grounding_recall"][0] == 1.0
    assert stats[record["id"]]["phrase_grounding_recall"][1] == stats["own-image"]["phrase_grounding_recall"][0]
    assert record["stats"]["phrase_grounding_recall"][1] == pytest.approx(
        stats["first-image"]["phrase_grounding_recall"][0], abs=1e-5)  # Data-Juicer's pairing


@needs_nltk
def test_unscorable_samples_are_rejected_with_their_reason(tmp_path):
    Image.new("RGB", (64, 64), "red").save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    records = [{"id": "ok", "text": f"{IMG} a red square", "images": [str(tmp_path / "ok.png")]},
               {"id": "broken", "text": f"{IMG} a red square", "images": [str(tmp_path / "broken.png")]},
               {"id": "tokens", "text": "a red square", "images": [str(tmp_path / "ok.png")]}]
    stats, pipe = run_op(grounding_op({}, min_recall=0.0), records)
    assert list(stats) == ["ok"]
    reasons = {r["record"]["id"]: r for r in pipe.last_counts["rejected_records"]}
    assert "broken.png" in reasons["broken"]["reason"]
    assert reasons["tokens"]["code"] == "image_token_mismatch"
    pairs = [{"id": "broken", "text": "", "images": [str(tmp_path / "ok.png"), str(tmp_path / "broken.png")]}]
    stats, pipe = run_op(ImagePairSimilarityFilter(hf_clip=CLIP, min_score=0.0), pairs)
    assert not stats and "broken.png" in pipe.last_counts["rejected_records"][0]["reason"]


def test_pair_and_text_similarity_share_one_clip_and_drops_name_the_threshold(tmp_path):
    (run,) = runs("image_pair_similarity_filter")
    summary, _, dropped = run_recipe(
        tmp_path, run["records"], [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": -1.0}},
                                   {"image_pair_similarity_filter": {"hf_clip": CLIP, "min_score": 0.5}}],
        text=f"{IMG}{IMG} a red circle")
    assert summary["model_loads"] and summary["max_model_loads_per_process"] == 1, summary["model_loads"]
    assert {d["id"] for d in dropped} == {r["id"] for r in run["records"]
                                          if r["stats"]["image_pair_similarity"][0] < 0.5}
    assert all("image_pair_similarity=" in str(d["__dj__drop__"]) and "below min_score 0.5" in str(d["__dj__drop__"])
               for d in dropped)


def test_without_nltk_a_recipe_fails_at_load_saying_what_to_install(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["nltk"] = None\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "a red circle", "images": []}) + "\n")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/kept.jsonl",
        "process": [{"phrase_grounding_recall_filter": {"hf_owlvit": OWLVIT, "nltk_data": NLTK_DATA}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", "r.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "pip install '.[grounding]' in djx's checkout" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "kept.jsonl").exists()
    listing = subprocess.run([sys.executable, "-m", "djx.cli", "ops", "phrase_grounding_recall_filter"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0 and "min_recall" in listing.stdout and "iou_thr" in listing.stdout


@needs_nltk
def test_out_of_memory_halves_the_forwards_and_keeps_data_juicers_stats(tmp_path):
    pair_run, grounding_run = runs("image_pair_similarity_filter")[0], runs("phrase_grounding_recall_filter")[0]
    cases = [("image_pair_similarity", pair_run["records"][-8:], {"image_pair_similarity_filter": {
                 "hf_clip": CLIP, "min_score": 0.0, "forward_batch_size": 8}}),
             ("phrase_grounding_recall", grounding_run["records"][-8:], {"phrase_grounding_recall_filter": {
                 "hf_owlvit": OWLVIT, "nltk_data": NLTK_DATA, "min_recall": 0.0, "forward_batch_size": 8,
                 "data_juicer_image_offset": True}})]
    for stat, records, op in cases:
        summary, kept, dropped = run_recipe(tmp_path / stat, records, [op], inject_faults=["oom_above:1"])
        assert summary["events"]["oom_retries"] >= 2
        got = {s["id"]: s["__dj__stats__"][stat] for s in kept + dropped}
        assert len(got) == len(records)
        for record in records:
            assert got[record["id"]] == pytest.approx(record["stats"][stat], abs=1e-5), record["id"]


@needs_nltk
def test_a_broken_image_named_by_two_samples_of_a_batch_rejects_both_in_every_model_filter(tmp_path):
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    Image.new("RGB", (64, 64), "red").save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    ok, broken = str(tmp_path / "ok.png"), str(tmp_path / "broken.png")
    text = f"{IMG} a red square"
    ops = [(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0), [[broken], [ok], [broken]]),
           (grounding_op({}, min_recall=0.0), [[broken], [ok], [broken]]),
           (ImagePairSimilarityFilter(hf_clip=CLIP, min_score=0.0), [[ok, broken], [broken, ok], [ok, broken]])]
    for op, images in ops:
        t = "" if isinstance(op, ImagePairSimilarityFilter) else text
        stats, pipe = run_op(op, [{"id": f"s{k}", "text": t, "images": i} for k, i in enumerate(images)])
        rejected = {r["record"]["id"] for r in pipe.last_counts["rejected_records"]}
        assert (set(stats), rejected) == (({"s1"}, {"s0", "s2"}) if len(images[0]) == 1 else (set(), {"s0", "s1", "s2"})), op
