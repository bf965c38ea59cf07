"""Reasons that explain: a drop reason names the stat, its value and the threshold; `djx explain`
tells one sample's journey (output, each op's thresholds, stats and verdict) from a run's outputs."""
from __future__ import annotations

import json

PROCESS = [{"text_length_filter": {"min_len": 5}},
           {"image_size_filter": {"min_size": "70B"}},
           {"image_shape_filter": {"min_width": 32, "min_height": 32}},
           {"image_aspect_ratio_filter": {"min_ratio": 0.5, "max_ratio": 2.0}}]


def _run(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli):
    make_image("tiny.png", (40, 40))  # a few dozen bytes: below min_size
    (tmp_path / "images" / "tiny.png").write_bytes((tmp_path / "images" / "tiny.png").read_bytes()[:60])
    records = mm_records + [{"id": 99, "text": "a sample text that is long enough", "images": ["images/tiny.png"]}]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=PROCESS)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    return recipe, tmp_path / "out" / "o.jsonl"


def test_drop_reasons_name_the_stat_its_value_and_the_threshold(tmp_path, mm_records, make_image, write_jsonl,
                                                                write_recipe, read_jsonl, djx_cli):
    _, export = _run(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli)
    reasons = {s["id"]: s["__dj__drop__"]["reason"] for s in read_jsonl(export.with_name("o.dropped.jsonl"))}
    assert reasons[1] == "text_len=2 below min_len 5"
    assert reasons[2] == "image_width=[16] below min_width 32; image_height=[16] below min_height 32"
    assert reasons[3] == "aspect_ratios=[3.2] above max_ratio 2"
    assert reasons[99].startswith("image_sizes=[60] below min_size 70B (70 bytes)")


def test_explain_tells_a_samples_journey(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli):
    recipe, export = _run(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli)
    dropped = djx_cli("explain", export, "3")  # the wide image: dropped by the aspect-ratio filter
    assert dropped.rc == 0, dropped.err
    out = dropped.out
    assert f"sample __dj__pos__=3: dropped, in {export.with_name('o.dropped.jsonl')}" in out
    assert "op 2 image_shape_filter  [min_width 32, max_width none, min_height 32, max_height none, any_or_all any]" in out
    assert "stats: image_width=[128], image_height=[40]" in out
    assert out.count("passed") == 3 and "DROPPED: aspect_ratios=[3.2] above max_ratio 2" in out
    kept = djx_cli("explain", export, "--where", "id=0")
    assert kept.rc == 0 and "sample __dj__pos__=0: kept" in kept.out and kept.out.count("passed") == 4
    missing = djx_cli("explain", export, "4")
    assert "rejected" in missing.out and "REJECTED (bad_image): image 'images/missing.png'" in missing.out
    assert missing.out.count("not reached") == 2
    bad_text = djx_cli("explain", export, "7")
    assert "REJECTED (bad_input): text key 'text' is not a string" in bad_text.out
    # stricter thresholds: the passed filters that these would fail are named
    strict = write_recipe(tmp_path / "strict.yaml", dataset_path="d.jsonl", export_path="x.jsonl",
                          process=[{"text_length_filter": {"min_len": 40}}])
    res = djx_cli("explain", export, "0", "--recipe", strict)
    assert "passed in the run, but fails these thresholds: text_len=33 below min_len 40" in res.out


def test_explain_errors_say_what_to_give(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli):
    _, export = _run(tmp_path, mm_records, make_image, write_jsonl, write_recipe, djx_cli)
    assert "no sample with __dj__pos__ 500" in djx_cli("explain", export, "500").err
    assert "--where id=demo-1" in djx_cli("explain", export, "demo-1").err
    both = djx_cli("explain", export, "1", "--where", "id=1")
    assert both.rc == 1 and "not both" in both.err
    assert "no such output" in djx_cli("explain", tmp_path / "nowhere.jsonl", "1").err
    summary = json.loads(export.with_name("o.summary.json").read_text())
    assert [list(op)[0] for op in summary["recipe"]["process"]] == [list(op)[0] for op in PROCESS]


def test_explain_shows_the_text_a_llava_records_filters_judged(tmp_path, make_image, write_recipe, djx_cli):
    """With dataset_format: llava the filters see the turns as one `[[human]]: ... [[gpt]]: ...` text,
    not the caption: explain shows that text, so a drop reason can be read against it."""
    make_image("a.png", (40, 40))
    records = [{"id": "cap", "image": "images/a.png", "conversations": [
        {"from": "human", "value": "<image>\nDescribe the photo."}, {"from": "gpt", "value": "a red circle"}]}]
    (tmp_path / "d.json").write_text(json.dumps(records))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.json", export_path="out/o.json", np=1,
                          dataset_format="llava", process=[{"text_length_filter": {"max_len": 20}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    out = djx_cli("explain", tmp_path / "out" / "o.json", "0").out
    assert "DROPPED: text_len=" in out
    assert 'text the ops saw (dataset_format: llava): "[[human]]: <__dj__image>\\nDescribe the photo.\\n' \
           '[[gpt]]: a red circle <|__dj__eoc|>"' in out


def test_explain_names_the_thresholds_as_the_recipe_does():
    from djx.analyze.explain import _thresholds
    from djx.core.op.registry import build_op, load_builtin_ops
    load_builtin_ops()
    size = _thresholds(build_op("image_size_filter", {"max_size": "124KB"}))
    assert size == "min_size 0, max_size 124KB, any_or_all any"  # the recipe's names, not min_bytes
    lang = _thresholds(build_op("language_id_score_filter", {"lang": "en", "min_score": 0.5}, load_resources=False))
    assert lang == "lang en, min_score 0.5"
    assert _thresholds(build_op("text_length_filter", {"min_len": None, "max_len": 5})) == "min_len none, max_len 5"


def test_what_a_dataset_holds_cannot_act_on_the_terminal(tmp_path, write_jsonl, write_recipe, djx_cli):
    """A received dataset's caption, id, field names and image paths carry control sequences: explain
    shows them escaped, so a dropped sample cannot be redrawn as kept; the error line of a run that
    rejects nearly everything quotes them escaped too."""
    spoof = "ok\x1b[1A\x1b[2K\rsample __dj__pos__=0: kept\n  check: passed \u202e"
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": spoof, "text": spoof, "x\x1b]8;;http://e/\x07": 1}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 1, "max_len": 5}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    res = djx_cli("explain", tmp_path / "out" / "o.jsonl", "0")
    assert res.rc == 0 and "dropped" in res.out, res.err
    assert not any(c in res.out for c in "\x1b\r\x07\u202e"), repr(res.out)
    assert "\\x1b[1A\\x1b[2K\\rsample __dj__pos__=0: kept\\n  check: passed \\u202e" in res.out
    assert res.out.count("\n") == len(res.out.splitlines()) and "  check: passed" not in res.out.splitlines()
    images = write_jsonl(tmp_path / "i.jsonl", [{"text": "t", "images": [f"a\x1b[2J{i}.png"]} for i in range(200)])
    bad = write_recipe(tmp_path / "b.yaml", dataset_path=str(images), export_path="out/b.jsonl", np=1,
                       process=[{"image_shape_filter": {}}])
    res = djx_cli("process", bad, "--quiet")
    assert res.rc == 1 and "\x1b" not in res.err and "\\x1b[2J" in res.err, repr(res.err)
