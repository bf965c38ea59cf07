"""Recipes: what a user writes, and the errors that tell them what to change."""
from __future__ import annotations

import json

import pytest

from djx import Pipeline, RecipeError, load_recipe
from djx.ops.filter.text_length_filter import TextLengthFilter


def recipe_error(path, **overrides) -> str:
    with pytest.raises(RecipeError) as e:
        Pipeline.from_recipe(str(path), overrides or None)
    return str(e.value)


# -- global keys --------------------------------------------------------------------------------

def test_unknown_global_key_is_named_with_the_closest_valid_key(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", exprot_path="out.jsonl")
    msg = recipe_error(path)
    assert "'exprot_path'" in msg
    assert "'export_path'" in msg


def test_wrong_global_type_names_the_key_and_expected_type(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        batch_size="big")
    assert "batch_size: expected int, got 'big'" in recipe_error(path)


def test_boolean_is_not_accepted_as_a_number(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl", np=True)
    assert "np: expected" in recipe_error(path)


def test_dataset_and_export_paths_are_required(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", export_path="o.jsonl")
    assert "'dataset_path' is required" in recipe_error(path)


def test_export_path_suffix_must_name_a_format(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out.csv")
    assert ".jsonl, .json or .parquet" in recipe_error(path)


def test_invalid_yaml_is_a_recipe_error(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("dataset_path: [unclosed\n")
    assert "not valid YAML" in recipe_error(path)


# -- ops and their parameters -------------------------------------------------------------------

def test_wrong_op_parameter_type_names_the_full_path(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"text_length_filter": {"min_len": 3}},
                                 {"image_shape_filter": {"min_width": "big"}}])
    assert "process[1].image_shape_filter.min_width: expected int, got 'big'" in recipe_error(path)


def test_unknown_op_lists_the_closest_registered_names(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"text_lenght_filter": {"min_len": 3}}])
    msg = recipe_error(path)
    assert "unknown op 'text_lenght_filter'" in msg
    assert "text_length_filter" in msg.split("closest registered:")[1]


def test_unknown_op_parameter_is_named_with_a_suggestion(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"text_length_filter": {"min_lenn": 3}}])
    msg = recipe_error(path)
    assert "process[0].text_length_filter" in msg
    assert "unknown parameter 'min_lenn'" in msg
    assert "'min_len'" in msg


def test_literal_parameter_lists_the_allowed_values(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"image_shape_filter": {"any_or_all": "every"}}])
    msg = recipe_error(path)
    assert "process[0].image_shape_filter.any_or_all" in msg
    assert "'any'" in msg and "'all'" in msg


def test_ops_built_in_python_validate_their_parameters_like_a_recipe():
    with pytest.raises(RecipeError, match=r"text_length_filter\.min_len: expected int, got 'x'"):
        TextLengthFilter(min_len="x")
    with pytest.raises(RecipeError, match="did you mean 'max_len'"):
        TextLengthFilter(max_lenn=3)
    op = TextLengthFilter(min_len=5)
    assert op.min_len == 5 and op.params() == {"min_len": 5}


def test_an_op_without_parameters_may_be_written_bare_or_with_an_empty_value(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=["text_length_filter", {"image_shape_filter": None}])
    ops = Pipeline.from_recipe(str(path)).ops
    assert [op.name for op in ops] == ["text_length_filter", "image_shape_filter"]
    assert ops[0].min_len == 10  # Data-Juicer's default


# -- paths ----------------------------------------------------------------------------------------

def test_relative_paths_resolve_against_the_recipe_folder_not_the_cwd(tmp_path, write_recipe,
                                                                      monkeypatch):
    write_recipe(tmp_path / "project" / "recipe.yaml", dataset_path="data/in.jsonl",
                 export_path="../out/kept.jsonl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = load_recipe("../project/recipe.yaml")
    assert r.dataset_path == str(tmp_path / "project" / "data" / "in.jsonl")
    assert r.export_path == str(tmp_path / "out" / "kept.jsonl")


def test_a_run_from_another_folder_reads_and_writes_next_to_the_recipe(tmp_path, write_recipe,
                                                                      text_dataset, monkeypatch,
                                                                      djx_cli):
    write_recipe(tmp_path / "data" / "recipe.yaml", dataset_path="data.jsonl",
                 export_path="out/kept.jsonl", np=1, process=[{"text_length_filter": {"min_len": 4}}])
    monkeypatch.chdir(tmp_path)
    res = djx_cli("process", "data/recipe.yaml", "--quiet")
    assert res.rc == 0, res.err
    assert (tmp_path / "data" / "out" / "kept.jsonl").exists()
    assert not (tmp_path / "out").exists()


def test_a_data_juicer_recipe_runs_as_it_is_and_says_which_keys_it_ignores(tmp_path, write_recipe,
                                                                           text_dataset, read_jsonl, djx_cli):
    recipe = write_recipe(tmp_path / "dj.yaml", project_name="dj", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=1, executor_type="default", use_cache=False,
                          open_tracer=True, op_fusion=False, keep_hashes_in_res_ds=False,
                          process=[{"text_length_filter": {"min_len": 4, "num_proc": 8, "mem_required": "1GB",
                                                           "batch_size": 16}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    for key in ("use_cache", "open_tracer", "op_fusion", "keep_hashes_in_res_ds",
                "process[0].text_length_filter.num_proc", "process[0].text_length_filter.mem_required"):
        assert f"note: {key} ignored: " in res.out, key
    assert "batch_size ignored" not in res.out  # a djx op parameter too: it takes effect
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == text_dataset.kept_ids(4)
    # Data-Juicer's executor_type maps onto executor; typos are still refused
    assert load_recipe(str(recipe)).executor == "local"
    assert load_recipe(str(recipe), {"executor_type": "ray"}).executor == "ray"
    with pytest.raises(RecipeError, match="executor_type: 'ray' contradicts executor: 'local'"):
        load_recipe(str(recipe), {"executor_type": "ray", "executor": "local"})
    with pytest.raises(RecipeError, match="unknown recipe key 'use_cahce'"):
        load_recipe(str(recipe), {"use_cahce": True})
    with pytest.raises(RecipeError, match="unknown parameter 'num_porc'"):
        load_recipe(str(recipe), {"process.0.text_length_filter.num_porc": 2}).build_ops()


# -- overrides --------------------------------------------------------------------------------------

def test_set_reaches_into_an_op_parameter(tmp_path, write_recipe, text_dataset, read_jsonl, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 8}}])
    res = djx_cli("process", recipe, "--quiet", "--set", "process.0.text_length_filter.min_len=3")
    assert res.rc == 0, res.err
    kept = read_jsonl(tmp_path / "out" / "kept.jsonl")
    assert [s["id"] for s in kept] == text_dataset.kept_ids(min_len=3)


def test_set_values_are_yaml_typed_and_validated(tmp_path, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          process=[{"text_length_filter": {"min_len": 8}}])
    p = Pipeline.from_recipe(str(recipe), {"batch_size": 3, "export_dropped": False,
                                           "process.0.text_length_filter.max_len": 20})
    assert p.recipe.batch_size == 3 and p.recipe.export_dropped is False
    assert (p.ops[0].min_len, p.ops[0].max_len) == (8, 20)
    assert "process[0].text_length_filter.max_len: expected int, got 'long'" in recipe_error(
        recipe, **{"process.0.text_length_filter.max_len": "long"})
    assert "did you mean 'export_path'" in recipe_error(recipe, exprot_path="x.jsonl")


def test_set_into_a_bare_op_entry_sets_its_parameter(tmp_path, write_recipe):
    """`- text_length_filter` (no colon) is a valid op entry; --set must reach into it too."""
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          process=["text_length_filter"])
    p = Pipeline.from_recipe(str(recipe), {"process.0.text_length_filter.min_len": 3})
    assert p.ops[0].min_len == 3


def test_set_to_a_missing_op_index_is_a_recipe_error(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          process=[{"text_length_filter": {"min_len": 8}}])
    res = djx_cli("process", recipe, "--set", "process.3.text_length_filter.min_len=3")
    assert res.rc == 1
    assert "process.3.text_length_filter.min_len" in res.err


def test_set_without_equals_sign_is_a_recipe_error(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl")
    res = djx_cli("process", recipe, "--set", "np")
    assert res.rc == 1 and "KEY=VALUE" in res.err


def test_np_and_export_path_flags_override_the_recipe(tmp_path, write_recipe, text_dataset,
                                                      read_jsonl, djx_cli, monkeypatch):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="recipe_out/kept.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 4}}])
    monkeypatch.chdir(tmp_path / "data")
    res = djx_cli("process", recipe, "--quiet", "--np", "2", "--export-path", "cli_out/kept.jsonl")
    assert res.rc == 0, res.err
    export = tmp_path / "data" / "cli_out" / "kept.jsonl"  # relative to the cwd, like any CLI path
    assert [s["id"] for s in read_jsonl(export)] == text_dataset.kept_ids(min_len=4)
    summary = json.loads(export.with_name("kept.summary.json").read_text())
    assert summary["workers"] == 2
    assert not (tmp_path / "recipe_out").exists()


# -- text keys ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text_keys", ["content", ["content", "title"]])
def test_text_keys_may_be_a_string_or_a_list(tmp_path, write_recipe, write_jsonl, read_jsonl,
                                             text_keys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"content": "long enough content", "title": "t"},
                                              {"content": "tiny", "title": "a long enough title"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl",
                          np=1, text_keys=text_keys, process=[{"text_length_filter": {"min_len": 8}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert data.exists() and summary["rejected"] == 0
    kept = read_jsonl(tmp_path / "out" / "k.jsonl")
    assert [s["content"] for s in kept] == ["long enough content"]
    assert kept[0]["__dj__stats__"] == {"text_len": len("long enough content")}


def test_a_minimum_above_its_maximum_is_refused_naming_both(tmp_path, djx_cli, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/o.jsonl",
                          process=[{"text_length_filter": {"min_len": 5, "max_len": 2}},
                                   {"image_text_similarity_filter": {"hf_clip": "x", "min_score": 1.5}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 1 and "Traceback" not in res.err
    assert "text_length_filter: min_len 5 is above max_len 2" in res.err
    assert "image_text_similarity_filter: min_score 1.5 is above max_score 1.0" in res.err  # the default max


def test_an_empty_range_is_refused_from_python_too():
    from djx import RecipeError
    from djx.core.op.registry import get_op_class
    with pytest.raises(RecipeError, match="min_len 9 is above max_len 3"):
        get_op_class("text_length_filter")(min_len=9, max_len=3)
    get_op_class("text_length_filter")(min_len=3, max_len=3)  # one length passes: allowed
