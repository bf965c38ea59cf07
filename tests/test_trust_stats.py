"""Stats in an input decide verdicts when reused, so a received file must not choose its own: djx
reuses only the stats it wrote itself (signed, same op and model, images unchanged), or, when the
recipe says `trust_input_stats: true`, stats in range. Foreign stats are dropped from the export and
counted; a `__dj__stats__` that is not an object rejects its sample as bad input."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

DEMO = Path(__file__).parent / "assets" / "demo"
CLIP = str(Path(__file__).parent / "assets" / "models" / "tiny-clip")
TEXTS = ["short", "a text that is long enough to pass", "tiny", "another text long enough to be kept"]


def run(djx_cli, write_recipe, folder: Path, data: Path, process: list, **keys) -> dict:
    recipe = write_recipe(folder / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=process, **keys)
    res = djx_cli("process", recipe)
    assert res.rc == 0, res.err
    summary = json.loads((folder / "out" / "o.summary.json").read_text())
    return summary | {"table": res.out, "log": res.out + res.err, "export": folder / "out" / "o.jsonl"}


def test_forged_stats_choose_no_verdict(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli):
    forged = [{"text": t, "__dj__stats__": {"text_len": 1000 if len(t) < 10 else -1, "planted": 7}} for t in TEXTS]
    data = write_jsonl(tmp_path / "forged.jsonl", forged)
    out = run(djx_cli, write_recipe, tmp_path, data, [{"text_length_filter": {"min_len": 10, "max_len": 100}}])
    assert out["ops"][0]["reused_stats"] == 0
    kept = read_jsonl(out["export"])
    assert [s["text"] for s in kept] == [TEXTS[1], TEXTS[3]]  # the real lengths decided
    assert all(s["__dj__stats__"] == {"text_len": len(s["text"])} for s in kept)  # "planted" not copied
    assert out["events"]["foreign_stats_dropped"] == 8 and "djx did not write were dropped" in out["table"]


def test_only_stats_djx_wrote_unedited_are_reused(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in TEXTS])
    first = run(djx_cli, write_recipe, tmp_path / "one", data, [{"text_length_filter": {"min_len": 10}}])
    again = run(djx_cli, write_recipe, tmp_path / "two", first["export"], [{"text_length_filter": {"min_len": 20}}])
    assert again["ops"][0]["reused_stats"] == 2  # a new threshold: djx's own stats reused
    # someone edits the text of a signed sample and keeps its signature and stats
    edited = read_jsonl(first["export"])
    edited[0]["text"] = "x"
    data2 = write_jsonl(tmp_path / "edited.jsonl", edited)
    third = run(djx_cli, write_recipe, tmp_path / "three", data2, [{"text_length_filter": {"min_len": 10}}])
    assert third["ops"][0]["reused_stats"] == 1 and third["kept"] == 1
    # the same op with a parameter that changes the stat is not the op that wrote it
    other = run(djx_cli, write_recipe, tmp_path / "four", first["export"],
                [{"text_length_filter": {"min_len": 10, "text_key": "text"}}])
    assert other["ops"][0]["reused_stats"] == 0


def test_trusting_input_stats_is_opt_in_and_range_checked(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli):
    forged = [{"text": "short", "__dj__stats__": {"text_len": 1000}},
              {"text": "short", "__dj__stats__": {"text_len": -1}}]
    data = write_jsonl(tmp_path / "dj.jsonl", forged)
    out = run(djx_cli, write_recipe, tmp_path, data, [{"text_length_filter": {"min_len": 10, "max_len": 5000}}],
              trust_input_stats=True)
    assert out["ops"][0]["reused_stats"] == 1  # 1000 is a length; -1 is not, so it is computed again
    kept = read_jsonl(out["export"])
    assert [s["__dj__stats__"]["text_len"] for s in kept] == [1000]
    assert "__djx__stats_provenance__" not in kept[0]  # kept as trusted, never signed as djx's own


@pytest.mark.slow
@pytest.mark.models
def test_a_model_filter_reuses_only_while_the_images_are_unchanged(tmp_path, read_jsonl, write_recipe, djx_cli):
    shutil.copytree(DEMO / "images", tmp_path / "images")
    (tmp_path / "d.jsonl").write_text("".join((DEMO / "demo.jsonl").read_text().splitlines(keepends=True)[:6]))
    clip = [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": -1.0}}]
    first = run(djx_cli, write_recipe, tmp_path / "one", tmp_path / "d.jsonl", clip)
    again = run(djx_cli, write_recipe, tmp_path / "two", first["export"], clip)
    assert again["ops"][0]["reused_stats"] == first["kept"] == 6
    assert "warning: image_text_similarity_filter computed nothing" in again["table"] and "ran no model" in again["table"]
    assert "loading models" in first["log"] and "loading models" not in again["log"]
    image = tmp_path / read_jsonl(first["export"])[0]["images"][0]
    shutil.copy(tmp_path / "images" / Path(read_jsonl(first["export"])[1]["images"][0]).name, image)
    third = run(djx_cli, write_recipe, tmp_path / "three", first["export"], clip)
    assert third["ops"][0]["reused_stats"] == 5 and "computed nothing" not in third["table"]


@pytest.mark.parametrize("stats", ["0.9", [0.9], 3, None])
def test_a_stats_field_that_is_not_an_object_is_bad_input(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli,
                                                          stats):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "a text long enough", "__dj__stats__": stats},
                                              {"text": "another text long enough"}])
    out = run(djx_cli, write_recipe, tmp_path, data, [{"text_length_filter": {"min_len": 5}}])
    assert out["kept"] == 1 and out["rejected_by_code"] == {"bad_input": 1}
    rejected = read_jsonl(tmp_path / "out" / "o.rejected.jsonl")
    assert rejected[0]["code"] == "bad_input" and "__dj__stats__ must be an object" in rejected[0]["reason"]


def test_check_finds_impossible_stats_in_an_export(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in TEXTS])
    out = run(djx_cli, write_recipe, tmp_path, data, [{"text_length_filter": {"min_len": 10}}])
    recipe = tmp_path / "r.yaml"
    assert djx_cli("check", out["export"], "--recipe", recipe).rc == 0
    samples = read_jsonl(out["export"])
    samples[0]["__dj__stats__"]["text_len"] = -1
    out["export"].write_text("".join(json.dumps(s) + "\n" for s in samples))
    res = djx_cli("check", out["export"], "--recipe", recipe)
    assert res.rc == 1 and "out of its possible range [0, None]: -1" in res.out
