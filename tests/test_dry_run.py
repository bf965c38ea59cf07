"""`djx process --dry-run` checks what it can without running (the dataset's first records, model
folders and the local hub cache, host memory for the planned workers) and shows the resolved
paths and batch size; a real run refuses workers that cannot fit in host memory."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO_DIR

TINY_CLIP = REPO_DIR / "tests" / "assets" / "models" / "tiny-clip"
DEMO = REPO_DIR / "tests" / "assets" / "demo" / "demo.jsonl"


def _clip(model: str, **params) -> dict:
    return {"image_text_similarity_filter": {"hf_clip": model, "min_score": 0.1, **params}}


@pytest.mark.slow
@pytest.mark.models
def test_a_sound_recipe_shows_paths_batch_size_and_models_and_exits_0(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(DEMO), export_path="out/k.parquet", np=1,
                          batch_size=16, process=[{"text_length_filter": {}}, _clip(str(TINY_CLIP))])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 0, res.out + res.err
    assert f"dataset: {DEMO} (1 file)" in res.out
    assert f"export: {tmp_path / 'out' / 'k.parquet'} (dropped: {tmp_path / 'out' / 'k.dropped.parquet'}" in res.out
    assert "batch_size: 16 samples per batch" in res.out
    assert f"local folder {TINY_CLIP}, config loads" in res.out
    assert "first 8 record(s) read: 8 usable, 8 with images" in res.out
    assert "dry run: no problem found" in res.out
    assert not (tmp_path / "out").exists()


def test_every_problem_is_listed_and_the_dry_run_exits_1(tmp_path, write_recipe, write_jsonl, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "<image> a red circle", "images": ["a.png"]}] * 3)
    data.write_text(data.read_text() + "{not json\n")
    empty_model = tmp_path / "models" / "empty"
    empty_model.mkdir(parents=True)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                          process=[_clip("models/empty"), _clip("./models/missing")])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 1
    problems = [line for line in res.out.splitlines() if line.startswith("  problem: ")]
    assert len(problems) == 4, res.out
    assert any("none of the 3 images the first records name exists, e.g. 'a.png'" in p for p in problems)
    # one bad record among usable ones is what a run rejects: a note, not a problem
    assert "note: dataset: record 3 (line 4): not valid JSON" in res.out
    assert any("image_special_token '<__dj__image>'" in p and "tokens seen: <image>" in p for p in problems)
    assert any(f"model {empty_model}: the folder holds no config.json" in p for p in problems)
    assert any("model ./models/missing: no such folder" in p for p in problems)


def test_records_naming_only_urls_or_data_uris_are_told_djx_reads_local_files(tmp_path, write_recipe, write_jsonl,
                                                                              djx_cli):
    uri = "data:image/png;base64," + "A" * 100_000
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "images": ["https://example.com/a.jpg"]},
                                              {"text": "b", "images": [uri]}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                          process=[{"image_size_filter": {}}])
    res = djx_cli("process", recipe, "--dry-run")
    problems = [line for line in res.out.splitlines() if line.startswith("  problem: ")]
    assert res.rc == 1 and len(problems) == 1, res.out
    assert "the 2 images the first records name are URLs or data: URIs" in problems[0]
    assert "djx reads local files" in problems[0] and "image_root" not in problems[0]


def test_images_without_the_token_are_a_problem_only_where_an_op_pairs_text_chunks_with_them(
        tmp_path, write_recipe, write_jsonl, djx_cli):
    image = tmp_path / "a.png"
    from PIL import Image
    Image.new("RGB", (80, 80), "red").save(image)
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "a red square", "images": [str(image)]}] * 3)
    said = "none of the first records with images carries image_special_token '<__dj__image>'"
    shapes = write_recipe(tmp_path / "shape.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                          process=[{"image_shape_filter": {"min_width": 10}}])
    res = djx_cli("process", shapes, "--dry-run")
    assert res.rc == 0 and f"note: dataset: {said}" in res.out, res.out
    pairs = write_recipe(tmp_path / "pairs.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                         process=[_clip(str(TINY_CLIP))])
    res = djx_cli("process", pairs, "--dry-run")
    assert res.rc == 1 and f"problem: dataset: {said}" in res.out, res.out


def test_an_image_key_that_holds_no_images_while_the_texts_carry_the_token_is_a_problem_and_a_run_warns(
        tmp_path, write_recipe, write_jsonl, djx_cli):
    """A typo in image_key: the image filters judge no image and keep every sample. The dry run
    says so, naming the fields that hold lists; the run, whose outputs are sound, warns per op."""
    from PIL import Image
    Image.new("RGB", (80, 80), "red").save(tmp_path / "a.png")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"<__dj__image> a red square {i}", "images": ["a.png"]}
                                              for i in range(5)])
    keys = dict(dataset_path=str(data), export_path="out/k.jsonl", np=1,
                process=[{"image_shape_filter": {"min_width": 5000}}, {"text_length_filter": {"min_len": 1}}])
    typo = write_recipe(tmp_path / "typo.yaml", image_key="image", **keys)
    res = djx_cli("process", typo, "--dry-run")
    assert res.rc == 1 and "problem: dataset: none of the first 5 records has images under image_key 'image', " \
                           "yet 5 of their texts carry '<__dj__image>'" in res.out, res.out
    assert "(fields holding lists: images)" in res.out
    run = djx_cli("process", typo)
    assert run.rc == 0 and "5 in = 5 kept" in run.out, run.out
    assert "warning: image_shape_filter saw no sample with images under image_key 'image' (of the 5 that " \
           "reached it)" in run.out and "warning: text_length_filter" not in run.out
    right = write_recipe(tmp_path / "right.yaml", **{**keys, "export_path": "right/k.jsonl"})
    assert djx_cli("process", right, "--dry-run").rc == 0
    run = djx_cli("process", right)
    assert run.rc == 0 and "5 in = 0 kept + 5 dropped" in run.out and "saw no sample with images" not in run.out


def test_a_missing_dataset_is_a_problem_not_a_traceback(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="nope.jsonl", export_path="out/k.jsonl",
                          process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 1 and "Traceback" not in res.err
    assert "problem: " in res.out and "nope.jsonl" in res.out


def test_outputs_a_run_would_refuse_are_problems_each_said_once(tmp_path, write_recipe, djx_cli):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"text": ["hello there world"], "raw": [b"\x00\xff"]}), tmp_path / "b.parquet")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="b.parquet", export_path="out/k.jsonl",
                          process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--dry-run")  # a JSON export of a binary column
    assert res.rc == 1 and "Traceback" not in res.err
    assert "problem: export_path " in res.out and "column 'raw'" in res.out and "is binary" in res.out
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could swap the run's folders under it
    res = djx_cli("process", recipe, "--dry-run", "--export-path", str(shared / "k.parquet"))
    assert res.rc == 1 and f"others may write in the folder {shared}" in res.out
    assert djx_cli("process", recipe, "--dry-run", "--export-path", str(tmp_path / "out" / "k.parquet")).rc == 0
    assert not (tmp_path / "out").exists()  # a dry run makes nothing
    missing = djx_cli("process", recipe, "--dry-run", "--set", "dataset_path=nope.jsonl")
    assert missing.rc == 1 and missing.out.count("problem: dataset not found") == 1


def _dry_run_hub(tmp_path, write_recipe, offline: bool):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(DEMO), export_path="out/k.jsonl", np=1,
                          process=[_clip("no-such-org/no-such-model")])
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.models
def test_a_hub_id_is_looked_up_in_the_local_cache_only(tmp_path, write_recipe):
    online = _dry_run_hub(tmp_path, write_recipe, offline=False)
    assert online.returncode == 0, online.stdout + online.stderr
    assert "hub id no-such-org/no-such-model, not in the local Hugging Face cache" in online.stdout
    assert online.stdout.count("note: model no-such-org/no-such-model is not in the local Hugging Face cache: the "
                               "workers fetch it from the hub (without network access they wait on its retries; "
                               "set HF_HUB_OFFLINE=1 to fail at once, or give a local folder)") == 1
    offline = _dry_run_hub(tmp_path, write_recipe, offline=True)
    assert offline.returncode == 1
    assert "not a local folder and not in the local Hugging Face cache, and HF_HUB_OFFLINE is set" in offline.stdout


@pytest.mark.models
def test_np_above_the_cores_runs_one_worker_per_core_with_a_warning(tmp_path, write_recipe, djx_cli):
    from djx.core.plan.resources import cpu_count
    cores = cpu_count()
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(DEMO), export_path="out/k.jsonl", np=cores + 30,
                          process=[_clip(str(TINY_CLIP))])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 0, res.out + res.err
    assert res.out.startswith(f"plan: {cores} worker(s), 1 torch thread(s) each")
    assert (f"  warning: np={cores + 30} is more workers than the {cores} cores: running {cores} "
            "(more processes than cores only slow a run down)") in res.out
    assert f"np: {cores + 30} ({cores} worker(s) would run)" in res.out  # the settings line agrees with the plan


def test_workers_that_cannot_fit_in_host_memory_are_refused_with_the_np_that_fits():
    from djx.core.plan.preflight import host_memory_problem
    GiB = 1 << 30
    msg = host_memory_problem(64, 0, 8 * GiB, with_models=True, worker_bytes=512 << 20)
    assert msg == ("64 CPU worker(s) need about 32.0 GiB (models as planned 0.0 GiB, plus about 512 MiB per "
                   "worker) but this machine has 8.0 GiB available: set np to at most 16")
    assert host_memory_problem(16, 0, 8 * GiB, with_models=True, worker_bytes=512 << 20) is None


def test_a_dataset_whose_first_records_are_all_unusable_is_a_problem(tmp_path, write_recipe, djx_cli):
    (tmp_path / "d.jsonl").write_text("id,text\n1,a\n2,b\n")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl",
                          process=[{"text_length_filter": {"min_len": 1}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 1 and "problem: dataset: record 0 (line 1): not valid JSON" in res.out
