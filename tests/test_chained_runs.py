"""An export is an input: a second recipe on it, a copy of part of it kept elsewhere, and the dropped
and rejected files all read back with every image found (image paths written to resolve from the
output), through the `djx` command."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


def _first_run(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli, **keys) -> Path:
    """Recipe 1 on a dataset whose image paths are relative to its folder; returns the export."""
    data = write_jsonl(tmp_path / "data" / "data.jsonl", mm_records)
    shutil.move(str(tmp_path / "images"), str(tmp_path / "data" / "images"))
    recipe = write_recipe(tmp_path / "r1" / "r1.yaml", dataset_path=str(data), export_path="out/one.jsonl",
                          np=1, process=mm_process, **keys)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    return tmp_path / "r1" / "out" / "one.jsonl"


def _summary(export: Path) -> dict:
    return json.loads(export.with_name(export.name.replace(".jsonl", ".summary.json")).read_text())


def test_a_second_recipe_runs_on_the_export_of_the_first_in_another_folder(
        tmp_path, mm_records, mm_process, write_jsonl, write_recipe, read_jsonl, djx_cli):
    one = _first_run(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli)
    kept = read_jsonl(one)
    assert kept and all(os.path.isabs(p) and os.path.isfile(p) for s in kept for p in s["images"])
    # recipe 2 lives elsewhere, reads the image files (their sizes) and asks for larger images
    recipe = write_recipe(tmp_path / "elsewhere" / "r2.yaml", dataset_path=str(one), export_path="two.jsonl",
                          np=1, process=[{"image_size_filter": {"min_size": "1B"}},
                                         {"image_shape_filter": {"min_width": 50, "min_height": 50}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    two = tmp_path / "elsewhere" / "two.jsonl"
    s = _summary(two)
    assert s["rejected"] == 0 and s["input"] == len(kept)
    big = [r["id"] for r in kept if any(p.endswith("big.png") for p in r["images"]) or not r["images"]]
    assert [r["id"] for r in read_jsonl(two)] == big


def test_a_head_copy_of_an_export_kept_elsewhere_reads_every_image(
        tmp_path, mm_records, mm_process, write_jsonl, write_recipe, read_jsonl, djx_cli):
    one = _first_run(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli)
    lines = one.read_text().splitlines(keepends=True)[:5]  # `head -5 one.jsonl > /copy/part.jsonl`
    part = tmp_path / "copy" / "part.jsonl"
    part.parent.mkdir()
    part.write_text("".join(lines))
    recipe = write_recipe(tmp_path / "copy" / "r.yaml", dataset_path="part.jsonl", export_path="out/p.jsonl",
                          np=1, recompute_stats=True, process=mm_process)  # recomputed: the images are read
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    s = _summary(tmp_path / "copy" / "out" / "p.jsonl")
    assert (s["input"], s["kept"], s["rejected"]) == (5, 5, 0)


def test_dropped_and_rejected_files_are_inputs_again(
        tmp_path, mm_records, mm_process, write_jsonl, write_recipe, read_jsonl, djx_cli, make_image):
    one = _first_run(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli)
    dropped, rejected = one.with_name("one.dropped.jsonl"), one.with_name("one.rejected.jsonl")
    # the dropped samples, with filters loose enough to keep them all: every image is found
    loose = write_recipe(tmp_path / "again" / "loose.yaml", dataset_path=str(dropped), export_path="d.jsonl",
                         np=1, recompute_stats=True, process=[{"image_shape_filter": {"min_width": 1}},
                                        {"image_aspect_ratio_filter": {"min_ratio": 0.1, "max_ratio": 10.0}}])
    assert djx_cli("process", loose, "--quiet").rc == 0
    again = read_jsonl(tmp_path / "again" / "d.jsonl")
    assert len(again) == len(read_jsonl(dropped)) and _summary(tmp_path / "again" / "d.jsonl")["rejected"] == 0
    assert all("__dj__drop__" not in s for s in again)  # the earlier verdict does not stick to a kept sample
    # the rejected file: the missing image now exists, so those samples pass; the text that is a
    # number is rejected again, for the same reason
    make_image("missing.png", (64, 64), folder=tmp_path / "data" / "images")
    retry = write_recipe(tmp_path / "again" / "retry.yaml", dataset_path=str(rejected), export_path="r.jsonl",
                         np=1, process=mm_process)
    assert djx_cli("process", retry, "--quiet").rc == 0
    by_expect = {}
    for rec in read_jsonl(tmp_path / "again" / "r.jsonl"):
        by_expect.setdefault(rec["expect"], []).append(rec)
    assert len(by_expect["rejected"]) == 4 and all("missing.png" in r["images"][0] for r in by_expect["rejected"])
    first_pos = {r["record"]["id"]: r["__dj__pos__"] for r in read_jsonl(rejected) if isinstance(r["record"]["text"], str)}
    assert {r["id"]: r["__dj__orig_pos__"] for r in by_expect["rejected"]} == first_pos
    second = read_jsonl(tmp_path / "again" / "r.rejected.jsonl")
    assert len(second) == 4 and all(r["code"] == "bad_input" and r["record"]["text"] == 42 for r in second)


def test_relative_image_paths_resolve_from_the_export_folder(
        tmp_path, mm_records, mm_process, write_jsonl, write_recipe, read_jsonl, djx_cli):
    one = _first_run(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli,
                     image_paths="relative")
    kept = read_jsonl(one)
    refs = [p for s in kept for p in s["images"]]
    assert refs and all(not os.path.isabs(p) and (one.parent / p).is_file() for p in refs)
    for name in ("one.dropped.jsonl", "one.rejected.jsonl"):
        for rec in read_jsonl(one.with_name(name)):
            for p in (rec.get("record") or rec).get("images", []):
                assert not os.path.isabs(p) and (p.endswith("missing.png") or (one.parent / p).is_file())
    # the export read back where it is: every image found
    recipe = write_recipe(tmp_path / "r2.yaml", dataset_path=str(one), export_path="two/two.jsonl", np=1,
                          recompute_stats=True, process=mm_process)
    assert djx_cli("process", recipe, "--quiet").rc == 0
    s = _summary(tmp_path / "two" / "two.jsonl")
    assert (s["kept"], s["rejected"]) == (len(kept), 0)


def test_image_root_resolves_image_paths_relative_to_another_folder(
        tmp_path, mm_records, mm_process, write_jsonl, write_recipe, read_jsonl, djx_cli, monkeypatch):
    records = [dict(r, images=[p.replace("images/", "") for p in r["images"]]) for r in mm_records]
    write_jsonl(tmp_path / "meta" / "data.jsonl", records)  # images live in tmp_path/images
    keys = dict(dataset_path="data.jsonl", export_path="out/o.jsonl", np=1, process=mm_process)
    out = tmp_path / "meta" / "out" / "o.jsonl"
    recipe = write_recipe(tmp_path / "meta" / "r.yaml", **keys)
    assert djx_cli("process", recipe, "--quiet").rc == 0
    assert _summary(out)["rejected_by_code"]["bad_image"] > 4  # not found next to the dataset
    expected = sorted(r["id"] for r in mm_records if r["expect"] == "kept")
    # in the recipe: relative to the recipe's folder
    rooted = write_recipe(tmp_path / "meta" / "rooted.yaml", image_root="../images", **keys)
    res = djx_cli("process", rooted, "--quiet", "--restart")
    assert res.rc == 0, res.err
    kept = read_jsonl(out)
    assert sorted(s["id"] for s in kept) == expected
    assert all(p.startswith(str(tmp_path / "images")) for s in kept for p in s["images"])
    # on the command line: relative to the current folder
    monkeypatch.chdir(tmp_path)
    assert djx_cli("process", recipe, "--quiet", "--set", "image_root=images", "--restart").rc == 0
    assert sorted(s["id"] for s in read_jsonl(out)) == expected
    bad = djx_cli("process", recipe, "--set", "image_root=nowhere")
    assert bad.rc == 1 and f"image_root: no such folder: {tmp_path / 'nowhere'}" in bad.err
