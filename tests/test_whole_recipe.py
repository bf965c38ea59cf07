"""A Data-Juicer recipe with ops djx does not have and wrong parameters: one error names every
problem (with the closest op names); `skip_unknown_ops: true` runs without the unknown ops and
lists them in the dry run, the table and the summary."""
from __future__ import annotations

import json

# the shape of a Data-Juicer recipe: Data-Juicer text ops djx does not have, among ops it has
DJ_PROCESS = [
    {"clean_ip_mapper": None},
    {"remove_repeat_sentences_mapper": None},
    {"specified_field_filter": {"field_key": "meta.src", "target_value": ["web"]}},
    {"sentence_split_mapper": {"lang": "en"}},
    {"text_length_filter": {"min_len": 5, "num_proc": 4}},
    {"image_aspect_ratio_filter": {"min_ratio": 0.333, "max_ratio": 3.0}},
    {"image_shape_filter": {"max_width": 1000}},
    {"image_text_similarity_filtr": {"min_score": 0.2}},
]


def test_every_unknown_op_and_bad_parameter_in_one_error(tmp_path, text_dataset, write_recipe, djx_cli):
    process = [dict(e) for e in DJ_PROCESS]
    process[4] = {"text_length_filter": {"min_len": "five"}}
    process[5] = {"image_aspect_ratio_filter": {"min_ratio": 0.333, "colour": "red"}}
    recipe = write_recipe(tmp_path / "dj.yaml", dataset_path=str(text_dataset.path), export_path="out/o.jsonl",
                          process=process)
    for args in ((), ("--dry-run",)):
        res = djx_cli("process", recipe, *args)
        assert res.rc == 1 and "Traceback" not in res.err
        assert "the recipe has 7 problems" in res.err
        not_yet = "is a Data-Juicer op that djx does not implement yet; write a plug-in (see docs/plugins.md)"
        for line in (f"process[0]: 'clean_ip_mapper' {not_yet}",
                     f"process[1]: 'remove_repeat_sentences_mapper' {not_yet}",
                     f"process[2]: 'specified_field_filter' {not_yet}",
                     f"process[3]: 'sentence_split_mapper' {not_yet}",
                     "process[4].text_length_filter.min_len: expected int, got 'five'",
                     "process[5].image_aspect_ratio_filter: unknown parameter 'colour'",
                     "process[7]: unknown op 'image_text_similarity_filtr'; did you mean "
                     "'image_text_similarity_filter'?"):
            assert line in res.err
        assert "did you mean" not in res.err.split("process[7]")[0]  # no look-alikes for Data-Juicer's ops
        assert "skip_unknown_ops: true" in res.err
    assert not (tmp_path / "out").exists()


def test_unknown_recipe_keys_and_wrong_types_in_one_error(tmp_path, text_dataset, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path), export_path="o.jsonl",
                          batch_size="big", exprot_dropped=False, np="two")
    res = djx_cli("process", recipe)
    assert res.rc == 1 and "the recipe has 3 problems" in res.err
    assert "batch_size: expected int, got 'big'" in res.err and "did you mean 'export_dropped'" in res.err
    assert "np: expected" in res.err


def test_skip_unknown_ops_runs_without_them_and_lists_them(tmp_path, write_jsonl, write_recipe, read_jsonl,
                                                           djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "abcdefghijk"[:i]} for i in range(12)])
    recipe = write_recipe(tmp_path / "dj.yaml", dataset_path=str(data), export_path="out/o.jsonl",
                          np=1, skip_unknown_ops=True, process=DJ_PROCESS)
    skipped = ["clean_ip_mapper", "remove_repeat_sentences_mapper", "specified_field_filter",
               "sentence_split_mapper",
               "image_text_similarity_filtr"]
    dry = djx_cli("process", recipe, "--dry-run")
    assert dry.rc == 0, dry.err
    for i, name in zip((0, 1, 2, 3), skipped):
        assert (f"note: process[{i}].{name} skipped (skip_unknown_ops): '{name}' is a Data-Juicer op that djx "
                "does not implement yet") in dry.out
    assert "note: process[7].image_text_similarity_filtr skipped (skip_unknown_ops): unknown op " in dry.out
    assert "op 0: text_length_filter(min_len=5)" in dry.out and "op 3" not in dry.out
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    assert "skipped (unknown ops, skip_unknown_ops): process[0] clean_ip_mapper" in res.out
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert [s["name"] for s in summary["skipped_ops"]] == skipped
    assert [op["name"] for op in summary["ops"]] == ["text_length_filter", "image_aspect_ratio_filter",
                                                     "image_shape_filter"]
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "o.jsonl")] == list(range(5, 12))


def test_skip_unknown_ops_with_no_known_op_fails_instead_of_copying(tmp_path, text_dataset, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "dj.yaml", dataset_path=str(text_dataset.path), export_path="out/o.jsonl",
                          skip_unknown_ops=True, process=[{"clean_ip_mapper": None},
                                                          {"no_such_filter": {"min": 1}}])
    for args in ((), ("--dry-run",)):
        res = djx_cli("process", recipe, *args)
        assert res.rc == 1 and "Traceback" not in res.err, res.err
        assert ("skip_unknown_ops: djx has none of this recipe's 2 op(s) (clean_ip_mapper, no_such_filter), "
                "so the run would only copy its input") in res.err
    assert not (tmp_path / "out").exists()
