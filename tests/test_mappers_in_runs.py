"""Mappers through whole runs: the mapped text is what later filters judge and what the export
holds; special tokens (the configured ones too) survive spawned workers and Ray; the dropped and
rejected files say which text a verdict was made on; stats that describe a text before a mapper
changed it are never reused for the changed one; `djx ops`, `djx explain`, `djx check` and a
resumed run see mappers as they see filters."""
from __future__ import annotations

import pytest

from djx import DROP_KEY, STATS_KEY, Pipeline
from djx.ops.common.special_tokens import split_at_tokens

from helpers import djx, hold, kill_when, outputs_by_position, read_jsonl_file, setup_held_run, write_jsonl_file

pytestmark = pytest.mark.slow
TEXT_MAPPERS = [{"punctuation_normalization_mapper": {}}, {"whitespace_normalization_mapper": {}},
                {"clean_links_mapper": {}}, {"clean_email_mapper": {"repl": "[EMAIL]"}}]
OPTIONAL = [("fix_unicode_mapper", "ftfy"), ("clean_html_mapper", "selectolax")]


def all_mappers() -> list[dict]:
    import importlib.util
    return [{name: {}} for name, module in OPTIONAL if importlib.util.find_spec(module)] + TEXT_MAPPERS


def tempting(img: str, eoc: str) -> list[dict]:
    texts = [f"<p>{img}Hello &amp; “bye”…</p>", f'<a href="http://x.com/{img}">link</a> <img src="{img}">',
             f"mail a@b.com{img} or http://x.com/{img}, www.site.com/{img}p", f"user{img}@example.com {eoc}",
             f"  {img}\t text \u3000{eoc}  ", f"ＡＢ{img}（全角）：{eoc}“{img}”…", f"x{img}{img}{eoc}{eoc}",
             "just text — with a link https://example.org/a and mail jo@mail.com"] * 3
    return [{"id": i, "text": t, "images": []} for i, t in enumerate(texts)]


def token_counts(records, tokens) -> dict:
    return {r["id"]: split_at_tokens(r["text"], tokens)[1::2] for r in records}


@pytest.mark.spawn
def test_spawned_workers_keep_configured_tokens_and_map_as_in_process(tmp_path, write_jsonl, write_recipe,
                                                                         djx_cli):
    img, eoc = "<image>", "[EOC]"
    records = tempting(img, eoc)
    write_jsonl(tmp_path / "data.jsonl", records)
    process = all_mappers() + [{"text_length_filter": {"min_len": 1}}]
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl", np=2,
                          batch_size=3, start_method="spawn", image_special_token=img, eoc_special_token=eoc,
                          process=process)
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and summary["kept"] == len(records), summary
    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    assert token_counts(kept, (img, eoc)) == token_counts(records, (img, eoc))
    in_process = Pipeline.from_recipe(str(recipe)).process([dict(r) for r in records])
    assert [r["text"] for r in kept] == [s["text"] for s in in_process]
    assert kept[-1]["text"] == "just text  -  with a link  and mail [EMAIL]"
    check = djx_cli("check", tmp_path / "out" / "kept.jsonl", "--recipe", recipe)
    assert check.rc == 0, check.out + check.err
    ops = djx_cli("ops", "clean_email_mapper")
    assert ops.rc == 0 and "pattern" in ops.out and "repl" in ops.out


def traced_run(tmp_path, write_jsonl, write_recipe, out="out", **keys) -> dict:
    """Punctuation normalized, then a length filter and an image filter judge the mapped text."""
    write_jsonl(tmp_path / "data.jsonl", [
        {"id": 0, "text": "“ok”", "images": []},                       # mapped to 4 chars: dropped
        {"id": 1, "text": "a long enough text…", "images": []},         # kept
        {"id": 2, "text": "long enough — but", "images": ["nowhere.png"]},  # rejected: no such image
        {"id": 3, "text": "plain", "images": []}])                      # unchanged: dropped
    recipe = write_recipe(tmp_path / f"{out}.yaml", dataset_path="data.jsonl", export_path=f"{out}/kept.jsonl",
                          process=[{"punctuation_normalization_mapper": {}}, {"text_length_filter": {"min_len": 6}},
                                   {"image_shape_filter": {}}], **keys)
    return Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)


def test_dropped_and_rejected_files_say_which_text_the_verdict_was_made_on(tmp_path, write_jsonl,
                                                                         write_recipe, djx_cli):
    summary = traced_run(tmp_path, write_jsonl, write_recipe, start_method="fork")
    assert (summary["kept"], summary["dropped"], summary["rejected"]) == (1, 2, 1) and summary["check"]["ok"]
    out = tmp_path / "out"
    (kept,) = read_jsonl_file(out / "kept.jsonl")
    assert kept["text"] == "a long enough text..."
    dropped = {r["id"]: r for r in read_jsonl_file(out / "kept.dropped.jsonl")}
    assert dropped[0]["text"] == '"ok"' and dropped[0][DROP_KEY]["text_as_read"] == "“ok”"
    assert "text_len=4 below min_len 6" in dropped[0][DROP_KEY]["reason"]
    assert "text_as_read" not in dropped[3][DROP_KEY]  # the mapper left it as it was
    (rejected,) = read_jsonl_file(out / "kept.rejected.jsonl")
    assert rejected["record"]["text"] == "long enough — but"  # as read: the rejected file re-runs
    assert rejected["text_seen"] == "long enough  -  but" and rejected["op"] == "image_shape_filter"
    explained = djx_cli("explain", out / "kept.jsonl", "0")
    assert "text as read: “ok”" in explained.out and "op 0 punctuation_normalization_mapper" in explained.out
    assert "text the op saw: long enough  -  but" in djx_cli("explain", out / "kept.jsonl", "2").out
    # the rejected file, read back as input, is the record as read again
    again = Pipeline(ops=[], dataset_path=str(out / "kept.rejected.jsonl"))
    assert [s["text"] for s in again.process(read_jsonl_file(out / "kept.rejected.jsonl"))] == ["long enough — but"]


def test_ray_writes_what_the_local_executor_writes(tmp_path, write_jsonl, write_recipe, ray_address):
    from helpers import assert_same_run
    both = {}
    for executor, extra in (("local", {"start_method": "fork"}), ("ray", {"ray_address": ray_address})):
        both[executor] = (traced_run(tmp_path, write_jsonl, write_recipe, out=executor, executor=executor, **extra),
                          outputs_by_position(tmp_path / executor))
    assert_same_run(both)


@pytest.mark.models
def test_ray_stages_after_a_mapper_say_which_text_the_verdict_was_made_on(tmp_path, write_jsonl, write_recipe,
                                                                          make_image, ray_address):
    """Mapper, then a model stage, then a model-free stage: each Ray stage gets the mapped samples,
    and still writes the text as read / as seen as the local executor does."""
    from helpers import REPO_DIR, assert_same_run
    make_image("big.png", (64, 64))
    make_image("small.png", (16, 16))
    write_jsonl(tmp_path / "data.jsonl", [
        {"id": 0, "text": "<__dj__image> a red “square”", "images": ["images/big.png"]},  # kept
        {"id": 1, "text": "<__dj__image> a red “square”", "images": ["images/small.png"]},  # dropped
        {"id": 2, "text": "<__dj__image> a red “square”", "images": ["images/gone.png"]}])  # rejected
    both = {}
    for executor, extra in (("local", {"start_method": "fork"}), ("ray", {"ray_address": ray_address})):
        recipe = write_recipe(tmp_path / f"{executor}.yaml", dataset_path="data.jsonl",
                              export_path=f"{executor}/kept.jsonl", executor=executor, **extra, process=[
                                  {"punctuation_normalization_mapper": {}},
                                  {"image_text_similarity_filter": {"hf_clip": str(REPO_DIR / "tests/assets/models/tiny-clip"),
                                                                    "min_score": -1.0}},
                                  {"image_shape_filter": {"min_width": 32}}])
        summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
        both[executor] = (summary, outputs_by_position(tmp_path / executor))
    assert_same_run(both)
    _, out = both["ray"]
    assert out["kept"][0]["text"] == '<__dj__image> a red "square"'
    assert out["dropped"][1][DROP_KEY]["text_as_read"] == "<__dj__image> a red “square”"
    assert out["rejected"][2]["text_seen"] == '<__dj__image> a red "square"'
    assert out["rejected"][2]["op"] == "image_text_similarity_filter"


def reuse_run(tmp_path, write_recipe, name, data, process, **keys) -> tuple[dict, list]:
    recipe = write_recipe(tmp_path / f"{name}.yaml", dataset_path=str(data), export_path=f"{name}/kept.jsonl",
                          start_method="fork", process=process, **keys)
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    return summary, read_jsonl_file(tmp_path / name / "kept.jsonl")


@pytest.mark.parametrize("trust", [False, True])
def test_stats_of_a_text_a_mapper_changed_are_computed_again(tmp_path, write_jsonl, write_recipe, trust):
    write_jsonl(tmp_path / "data.jsonl", [{"id": 0, "text": "a—b"}, {"id": 1, "text": "abcdef"}])
    length = {"text_length_filter": {"min_len": 0}}
    _, first = reuse_run(tmp_path, write_recipe, "first", tmp_path / "data.jsonl", [length])
    assert [r[STATS_KEY]["text_len"] for r in first] == [3, 6]
    # the export again, now mapped first: "a - b" is 5 long, and the unchanged text's stat is reused
    summary, second = reuse_run(tmp_path, write_recipe, "second", tmp_path / "first" / "kept.jsonl",
                                [{"punctuation_normalization_mapper": {}}, length], trust_input_stats=trust)
    assert [(r["text"], r[STATS_KEY]["text_len"]) for r in second] == [("a - b", 5), ("abcdef", 6)]
    assert summary["ops"][1]["reused_stats"] == 1
    # a stat computed before a mapper changed the text is not signed as the changed text's
    _, third = reuse_run(tmp_path, write_recipe, "third", tmp_path / "data.jsonl",
                         [length, {"punctuation_normalization_mapper": {}}])
    assert [r[STATS_KEY]["text_len"] for r in third] == [3, 6]  # what the filter saw
    summary, fourth = reuse_run(tmp_path, write_recipe, "fourth", tmp_path / "third" / "kept.jsonl", [length])
    assert [r[STATS_KEY]["text_len"] for r in fourth] == [5, 6] and summary["ops"][0]["reused_stats"] == 1


def test_input_stats_of_a_text_a_mapper_changed_leave_it_even_when_trusted(tmp_path, write_jsonl, write_recipe):
    write_jsonl(tmp_path / "data.jsonl", [{"id": 0, "text": "a—b", STATS_KEY: {"text_len": 3, "lang_score": 0.9}},
                                          {"id": 1, "text": "abc", STATS_KEY: {"text_len": 3, "lang_score": 0.8}}])
    summary, kept = reuse_run(tmp_path, write_recipe, "run", tmp_path / "data.jsonl",
                              [{"punctuation_normalization_mapper": {}}, {"text_length_filter": {"min_len": 0}}],
                              trust_input_stats=True)
    # the changed text's stats from the input describe the text before: gone, text_len computed again
    assert [r[STATS_KEY] for r in kept] == [{"text_len": 5}, {"text_len": 3, "lang_score": 0.8}]
    assert summary["ops"][1]["reused_stats"] == 1 and summary["check"]["ok"]


def test_a_killed_run_with_mappers_resumes_to_the_same_outputs(tmp_path):
    process = [{"hold_mapper": {"hold_file": str(tmp_path / "run" / "hold")}},
               {"punctuation_normalization_mapper": {}}, {"whitespace_normalization_mapper": {}},
               {"text_length_filter": {"min_len": 19}}]
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    for folder in (ref_dir, run_dir):
        folder.mkdir()
        recipe = setup_held_run(folder, process=process)
        records = read_jsonl_file(folder / "data.jsonl")  # odd ids map to 22 characters, even ones to fewer than 19
        write_jsonl_file(folder / "data.jsonl", [dict(r, text=f"sample — number\t{r['id']:04d}" if r["id"] % 2
                                                     else f"s — {r['id']}") for r in records])
    ref = djx("process", str(ref_dir / "recipe.yaml"), "--quiet")
    assert ref.wait() == 0, ref.stderr.read()
    hold(run_dir, 56)
    proc = djx("process", str(recipe), "--quiet", start_new_session=True)
    kill_when(run_dir, proc, 40)
    final = djx("process", str(recipe), "--quiet")
    out, err = final.communicate()
    assert final.returncode == 0 and "resuming" in out + err, err
    for name in ("o.jsonl", "o.dropped.jsonl"):
        assert read_jsonl_file(run_dir / "out" / name) == read_jsonl_file(ref_dir / "out" / name), name
    kept = read_jsonl_file(run_dir / "out" / "o.jsonl")
    assert kept and all(r["text"].startswith("sample  -  number ") for r in kept)
