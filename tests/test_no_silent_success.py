"""A run that could not do its job must not look like success, and a trial must not destroy a
finished run's outputs."""
from __future__ import annotations

import json


def _texts(n):
    return [{"text": f"sample number {i} with enough words"} for i in range(n)]


def test_a_trial_never_replaces_a_finished_full_runs_outputs(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", _texts(50))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export = (tmp_path / "out" / "o.jsonl").read_bytes()
    trial = djx_cli("process", recipe, "--quiet", "--limit", "5")
    assert trial.rc == 1 and "finished full run (50 kept of 50)" in trial.err and "--export-path" in trial.err
    assert (tmp_path / "out" / "o.jsonl").read_bytes() == export
    beside = djx_cli("process", recipe, "--quiet", "--limit", "5", "--export-path", tmp_path / "trial" / "o.jsonl")
    assert beside.rc == 0
    assert json.loads((tmp_path / "trial" / "o.summary.json").read_text())["kept"] == 5
    # a trial after a trial is fine, and so is a full run after a trial
    assert djx_cli("process", recipe, "--quiet", "--limit", "7", "--export-path", tmp_path / "trial" / "o.jsonl").rc == 0
    assert djx_cli("process", recipe, "--quiet", "--export-path", tmp_path / "trial" / "o.jsonl").rc == 0


def test_a_run_rejecting_nearly_everything_for_one_reason_fails(tmp_path, write_jsonl, write_recipe, djx_cli,
                                                                   make_image):
    make_image("ok.png", (64, 64))
    records = [{"text": f"sample {i} with an image <__dj__image>", "images": ["images/ok.png" if i % 40 == 0
                                                                             else f"elsewhere/{i}.png"]}
               for i in range(400)]  # 390 of 400 images are not where the records say
    data = write_jsonl(tmp_path / "d.jsonl", records)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"image_shape_filter": {"min_width": 8}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "390 of 400 samples (97.5%) were rejected as bad_image" in res.err
    assert "elsewhere/" in res.err and (tmp_path / "out" / "o.rejected.jsonl").exists()
    dry = djx_cli("process", recipe, "--dry-run")
    assert dry.rc == 0 and "images the first records name" not in dry.out  # some exist: a note, not a stop
    assert "are missing" in dry.out
    # the user's own bound replaces the rule
    assert djx_cli("process", recipe, "--quiet", "--restart", "--set", "max_rejected_fraction=1.0").rc == 0


def test_a_text_key_typo_and_conversation_records_fail_and_dry_run_says_why(tmp_path, write_jsonl, write_recipe,
                                                                              djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", _texts(30))
    typo = write_recipe(tmp_path / "typo.yaml", dataset_path=str(data), export_path="typo/o.jsonl", np=1,
                        text_keys="txt", process=[{"text_length_filter": {"min_len": 1}}])
    res = djx_cli("process", typo, "--quiet")
    assert res.rc == 1 and "30 of 30 samples (100.0%) were rejected as bad_input" in res.err
    assert "missing text key 'txt'" in res.err
    llava = write_jsonl(tmp_path / "llava.jsonl", [{"id": i, "image": "x.jpg", "conversations": [
        {"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "A cat."}]} for i in range(20)])
    conv = write_recipe(tmp_path / "conv.yaml", dataset_path=str(llava), export_path="conv/o.jsonl", np=1,
                        process=[{"text_length_filter": {"min_len": 1}}])
    assert djx_cli("process", conv, "--quiet").rc == 1
    dry = djx_cli("process", conv, "--dry-run")
    assert dry.rc == 1 and "conversations" in dry.out + dry.err


def test_a_filter_dropping_nearly_everything_is_a_success(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", _texts(100))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 1000}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err


def test_dry_run_stops_when_no_image_of_the_first_records_exists(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "<__dj__image> x", "images": [f"pics/{i}.jpg"]} for i in range(5)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"image_shape_filter": {}}])
    dry = djx_cli("process", recipe, "--dry-run")
    assert dry.rc == 1 and "none of the 5 images the first records name exists" in dry.out + dry.err
    assert "image_root" in dry.out + dry.err


def test_the_example_reason_of_a_systematic_rejection_is_cut_at_a_word_and_quoted(tmp_path):
    import json

    from djx.core.run.summary import first_reason
    long = "image 'x.png': " + " ".join(f"word{i}" for i in range(100))  # ~600 characters
    path = tmp_path / "o.rejected.jsonl"
    path.write_text(json.dumps({"code": "bad_input", "reason": "other"}) + "\n"
                    + json.dumps({"code": "bad_image", "reason": long}) + "\n")
    example = first_reason(str(path), "bad_image")
    assert example.endswith(" ...") and len(example) <= 304
    assert long.startswith(example[:-4]) and long[len(example) - 4] == " "  # whole words only
    assert first_reason(str(path), "bad_input") == "other"
