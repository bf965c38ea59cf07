"""A Data-Juicer user's LLaVA walkthrough as one chain, each step the command a user types: LLaVA
data of real photos converted as Data-Juicer's recipe expects it, Data-Juicer's own
llava-pretrain-refine.yaml run unchanged (only data and model paths given; its word list and
language models found in Data-Juicer's cache), the export analyzed, re-filtered with a tighter
bound (stats reused: no model loaded), converted back to LLaVA, and the same recipe on Ray giving
the same samples."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import text_resources as R

ASSETS = Path(__file__).parent / "assets"
RECIPE = ASSETS / "dj_recipes" / "llava-pretrain-refine.yaml"
MODELS = ASSETS / "models"
CAPTIONS = ["an astronaut in a white suit standing in front of a flag", "a cup of coffee with milk foam on a saucer",
            "a grey cat lying on a blanket and looking at the camera", "a rocket on the launch pad under a clear sky",
            "three people smiling at the camera in a room", "two panels showing the same street at day and night"]

pytestmark = [pytest.mark.slow, pytest.mark.models, pytest.mark.ray]


def djx(*args, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "djx.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"djx {' '.join(map(str, args))}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def summary(path: Path) -> dict:
    return json.loads(path.with_name(path.stem + ".summary.json").read_text())


def ids(path: Path) -> list:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_data_juicers_llava_walkthrough_runs_as_one_chain(tmp_path, ray_address):
    home = tmp_path / "dj-cache"  # what Data-Juicer would have downloaded, under its own names
    (home / "assets").mkdir(parents=True)
    (home / "models").mkdir()
    (home / "assets" / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    R.write_arpa(home / "models" / "en.arpa.bin", R.train_sentencepiece(home / "models" / "en.sp.model"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATA_JUICER_")}
    env.update(DATA_JUICER_CACHE_HOME=str(home), RAY_AUTH_MODE="disabled")
    work = tmp_path / "work"
    (work / "images").mkdir(parents=True)
    photos = sorted(p.name for p in (ASSETS / "faces").glob("*.jpg"))
    for name in photos:
        shutil.copy(ASSETS / "faces" / name, work / "images" / name)
    llava = [{"id": f"{i:09d}", "image": name, "conversations": [
        {"from": "human", "value": "<image>\nRender a clear and concise summary of the photo."},
        {"from": "gpt", "value": CAPTIONS[i % len(CAPTIONS)]}]} for i, name in enumerate(photos)]
    (work / "blip_laion_cc_sbu_558k.json").write_text(json.dumps(llava))
    # the tiny stand-ins for CLIP and BLIP score real photos near chance: their bounds are opened with them
    models = ["--image_text_similarity_filter.hf_clip", MODELS / "tiny-clip",
              "--image_text_matching_filter.hf_blip", MODELS / "tiny-blip-itm",
              "--image_text_similarity_filter.min_score", "-1", "--image_text_matching_filter.min_score", "0"]

    # 1. LLaVA -> Data-Juicer's format, captions only, with the image token the recipe names (its
    # comment: "aligned with the args when running conversion tools")
    dj_fmt = work / "dj" / "blip_laion_cc_sbu_558k_dj_fmt_only_caption.jsonl"
    djx("convert", "llava-to-djx", "blip_laion_cc_sbu_558k.json", dj_fmt, "--image-folder", "images",
        "--option", "only_keep_caption=true", "--image-special-token", "<image>", "--round-trip", cwd=work, env=env)
    # 2. the recipe unchanged: data and model paths only, as dj-process takes them
    refined = work / "out" / "refined.jsonl"
    djx("process", "--config", RECIPE, "--quiet", "--dataset_path", dj_fmt, "--export_path", refined, *models,
        cwd=work, env=env)
    first = summary(refined)
    assert len(first["ops"]) == 13 and first["skipped_ops"] == [] and first["check"]["ok"]
    assert first["input"] == len(photos) and first["rejected"] == 0  # every converted image was found
    assert first["kept"] > 0 and first["max_model_loads_per_process"] == 1
    kept = ids(refined)
    # 3. analyzed
    djx("analyze", refined, cwd=work, env=env)
    analysis = list((work / "out").glob("*analysis*")) + list((work / "out").glob("*report*"))
    assert analysis, sorted(p.name for p in (work / "out").iterdir())
    # 4. re-filtered with a tighter bound: every stat is reused, no model is loaded
    stats = [json.loads(line)["__dj__stats__"]["alnum_ratio"] for line in refined.read_text().splitlines()]
    bound = sorted(stats)[len(stats) // 2]
    tight = work / "out" / "tight.jsonl"
    djx("process", "--config", RECIPE, "--quiet", "--dataset_path", refined, "--export_path", tight, *models,
        "--alphanumeric_filter.min_ratio", bound, cwd=work, env=env)
    second = summary(tight)
    assert second["input"] == len(kept) and second["kept"] == sum(s >= bound for s in stats)
    assert second["max_model_loads_per_process"] == 0
    assert all(op["reused_stats"] == op["in"] for op in second["ops"] if op["name"].endswith("_filter"))
    # 5. back to LLaVA: the kept ones of the original records, as they were (the round trip kept the
    # questions that only_keep_caption left out)
    back = work / "out" / "tight_llava.json"
    djx("convert", "djx-to-llava", tight, back, "--image-folder", work / "images", cwd=work, env=env)
    by_id = {r["id"]: r for r in llava}
    records = json.loads(back.read_text())
    assert [{k: v for k, v in r.items() if not k.startswith(("__dj__", "__djx__"))} for r in records] == \
        [by_id[i] for i in ids(tight)]
    assert all(r["__dj__stats__"]["alnum_ratio"] >= bound for r in records)  # with the stats that kept them
    # 6. the recipe of step 2 on Ray: the same samples kept
    on_ray = work / "ray" / "refined.jsonl"
    djx("process", "--config", RECIPE, "--quiet", "--dataset_path", dj_fmt, "--export_path", on_ray, *models,
        "--executor", "ray", "--ray_address", ray_address, cwd=work, env=env)
    assert summary(on_ray)["check"]["ok"] and ids(on_ray) == kept
