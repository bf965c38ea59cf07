"""Data-Juicer's own LLaVA pretrain refinement recipe (tests/assets/dj_recipes/, unchanged) run by djx on
LLaVA-format data of real photos: only the data, the resource paths djx never downloads and the tiny
models are given on the command line. Every one of its 13 ops runs, nothing is lost, the check passes,
and the export is LLaVA records again."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import text_resources as R

ASSETS = Path(__file__).parent / "assets"
CAPTIONS = [
    "an astronaut in a white suit standing in front of a flag",
    "a cup of coffee with milk foam on a saucer",
    "a grey cat lying on a blanket and looking at the camera",
    "a rocket on the launch pad under a clear sky",
    "three people smiling at the camera in a room",
    "two panels showing the same street at day and at night",
    "a close view of a face with short dark hair",
    "a grid of small photos of different places",
]


def _llava_records(folder: Path) -> list[dict]:
    photos = sorted(p.name for p in (ASSETS / "faces").glob("*.jpg"))
    assert len(photos) >= 6, photos
    for name in photos:
        shutil.copy(ASSETS / "faces" / name, folder / name)
    records = [{"id": f"{i:09d}", "image": name, "conversations": [
        {"from": "human", "value": "<image>\nRender a clear and concise summary of the photo."},
        {"from": "gpt", "value": CAPTIONS[i % len(CAPTIONS)]}]} for i, name in enumerate(photos)]
    records.append({"id": "not-llava", "caption": "a record in neither format"})
    return records


@pytest.mark.slow
@pytest.mark.models
def test_data_juicers_llava_pretrain_recipe_runs_unchanged_on_llava_data(tmp_path, djx_cli):
    recipe = tmp_path / "llava-pretrain-refine.yaml"
    shutil.copy(ASSETS / "dj_recipes" / "llava-pretrain-refine.yaml", recipe)
    images = tmp_path / "images"
    images.mkdir()
    records = _llava_records(images)
    (tmp_path / "blip_laion_cc_sbu_558k.json").write_text(json.dumps(records))
    words = tmp_path / "words"
    words.mkdir()
    (words / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    sp = R.train_sentencepiece(tmp_path / "en.sp.model")
    arpa = R.write_arpa(tmp_path / "en.arpa", sp)
    models = ASSETS / "models"
    res = djx_cli("process", recipe, "--quiet",
                  "--set", f"dataset_path={tmp_path / 'blip_laion_cc_sbu_558k.json'}",
                  "--set", f"export_path={tmp_path / 'out' / 'refined.json'}",
                  "--set", "dataset_format=llava", "--set", "format_options.only_keep_caption=true",
                  "--set", f"image_root={images}", "--set", "start_method=fork",
                  "--set", f"process.4.flagged_words_filter.flagged_words_dir={words}",
                  "--set", f"process.5.perplexity_filter.sp_model_path={sp}",
                  "--set", f"process.5.perplexity_filter.kenlm_model_path={arpa}",
                  "--set", f"process.11.image_text_similarity_filter.hf_clip={models / 'tiny-clip'}",
                  "--set", f"process.12.image_text_matching_filter.hf_blip={models / 'tiny-blip-itm'}",
                  # the tiny models' scores mean nothing on real photos: their bounds opened, so samples get
                  # through all 13 ops to the export
                  "--set", "process.11.image_text_similarity_filter.min_score=-1",
                  "--set", "process.12.image_text_matching_filter.min_score=0")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "refined.summary.json").read_text())
    assert [op["name"] for op in summary["ops"]] == [
        "fix_unicode_mapper", "punctuation_normalization_mapper", "alphanumeric_filter",
        "character_repetition_filter", "flagged_words_filter", "perplexity_filter", "special_characters_filter",
        "word_repetition_filter", "image_aspect_ratio_filter", "image_shape_filter", "image_size_filter",
        "image_text_similarity_filter", "image_text_matching_filter"]
    assert summary["skipped_ops"] == []
    n = len(records)
    assert summary["input"] == n and summary["kept"] + summary["dropped"] + summary["rejected"] == n
    assert summary["check"]["ok"] is True
    # np: 42 in the recipe, mapped onto this machine's cores and said so
    assert any(note.startswith("warning: np=42") for note in summary["plan"]["notes"])
    rejected = json.loads((tmp_path / "out" / "refined.rejected.json").read_text())
    assert [r["__dj__pos__"] for r in rejected] == [n - 1]
    assert "dataset_format llava expects LLaVA records" in rejected[0]["reason"]
    kept = json.loads((tmp_path / "out" / "refined.json").read_text())
    assert kept and summary["ops"][-1]["in"] == n - 1  # every op saw every LLaVA record
    for rec in kept:  # LLaVA records again, each with its caption and the stats of every filter
        assert set(rec) >= {"id", "image", "conversations", "__dj__stats__"}
        assert rec["conversations"][1]["value"] in CAPTIONS
        assert {"alnum_ratio", "perplexity", "image_text_similarity", "image_text_matching_score"} \
            <= set(rec["__dj__stats__"])
    check = djx_cli("check", tmp_path / "out" / "refined.json")
    assert check.rc == 0, check.out + check.err
