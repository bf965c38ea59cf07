"""Recipes: what a user writes, loaded into a frozen Recipe, and the errors that tell them what to
change (the key path, what was expected, the closest valid name)."""
from __future__ import annotations

import pytest

from djx import Pipeline, RecipeError, load_recipe
from djx.core.recipe.recipe import parse_set, recipe_from_dict

PATHS = {"dataset_path": "d.jsonl", "export_path": "o.jsonl"}


def recipe_error(path, **overrides) -> str:
    with pytest.raises(RecipeError) as e:
        Pipeline.from_recipe(str(path), overrides or None)
    return str(e.value)


def dict_error(**keys) -> str:
    with pytest.raises(RecipeError) as e:
        recipe_from_dict({**PATHS, **keys})
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


def test_every_unknown_key_and_wrong_type_is_named_in_one_error():
    msg = dict_error(batch_sise=8, np="two", num_proc=4)
    assert "unknown recipe key 'batch_sise'; did you mean 'batch_size'?" in msg
    assert "np: expected int | None, got 'two'" in msg
    assert "unknown recipe key 'num_proc'; did you mean 'np'?" in msg  # Data-Juicer's name for it


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


@pytest.mark.parametrize("key, value, message", [
    ("np", 0, "np: must be >= 1, got 0"),
    ("batch_size", -4, "batch_size: must be >= 1, got -4"),
    ("gpu_mem_fraction", 1.5, "gpu_mem_fraction: must be in (0, 1], got 1.5"),
    ("max_rejected_fraction", 2, "max_rejected_fraction: must be in [0, 1], got 2"),
    ("sample_timeout", 0, "sample_timeout: must be > 0 seconds, got 0"),
    ("export_shard_size", -1, "export_shard_size: bytes per shard, >= 0"),
    ("inject_faults", ["oom_sometimes"], "inject_faults: unknown fault 'oom_sometimes'"),
    ("text_keys", [], "text_keys: must name at least one key"),
])
def test_numbers_outside_their_range_are_refused_with_the_range(key, value, message):
    assert message in dict_error(**{key: value})


def test_special_tokens_must_be_visible_and_apart():
    assert "image_special_token: must be a visible token such as '<__dj__image>'" in \
        dict_error(image_special_token="  ")
    for image, eoc in [("<img>", "<img>"), ("<img>", "<img><eoc>")]:
        assert "must differ and neither may contain the other" in \
            dict_error(image_special_token=image, eoc_special_token=eoc)
    recipe = recipe_from_dict({**PATHS, "image_special_token": "<image>", "eoc_special_token": "<eoc>"})
    assert recipe.run_context().image_special_token == "<image>"


def test_data_juicer_keys_are_accepted_and_listed_as_ignored_with_why():
    recipe = recipe_from_dict({**PATHS, "use_cache": False, "open_tracer": True, "executor_type": "default"})
    assert dict(recipe.ignored) == {"use_cache": "djx does not cache datasets; it streams them",
                                    "open_tracer": "djx writes every dropped sample with its op and reason"}
    assert recipe.executor == "local"  # Data-Juicer's executor_type maps onto executor
    assert recipe_from_dict({**PATHS, "executor_type": "ray"}).executor == "ray"
    assert "executor_type: 'ray' contradicts executor: 'local'; keep one" in \
        dict_error(executor_type="ray", executor="local")


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
    assert "unknown op 'text_lenght_filter'; did you mean 'text_length_filter'?" in msg
    path = write_recipe(tmp_path / "r2.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"image_sizes_filter": {}}, {"zebra_stripes_filter": {}}])
    msg = recipe_error(path)
    assert "unknown op 'image_sizes_filter'; did you mean 'image_size_filter'?" in msg  # not image_shape_filter
    assert "unknown op 'zebra_stripes_filter'\n" in msg + "\n"  # nothing spelled like it: no suggestion


def test_a_data_juicer_op_djx_lacks_is_named_as_such_without_look_alikes(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=[{"image_blur_mapper": {}}])
    assert recipe_error(path) == (
        "process[0]: 'image_blur_mapper' is a Data-Juicer op that djx does not implement yet; write a plug-in "
        "(see docs/plugins.md) (`djx ops` lists all ops; "
        "plug-ins need `custom_ops`; skip_unknown_ops: true runs without the unknown ones)")


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


def test_an_op_without_parameters_may_be_written_bare_or_with_an_empty_value(tmp_path, write_recipe):
    path = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                        process=["text_length_filter", {"image_shape_filter": None}])
    ops = Pipeline.from_recipe(str(path)).ops
    assert [op.name for op in ops] == ["text_length_filter", "image_shape_filter"]
    assert ops[0].min_len == 10  # Data-Juicer's default


def test_a_process_entry_is_one_op_with_a_mapping_of_parameters():
    assert "process[1]: each entry is one op" in dict_error(process=["text_length_filter", {"a": {}, "b": {}}])
    assert "process[0].text_length_filter: parameters must be a mapping, got 5" in \
        dict_error(process=[{"text_length_filter": 5}])
    assert "process: expected a list of ops" in dict_error(process="text_length_filter")


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


def test_a_recipe_path_that_is_missing_or_a_folder_says_so(tmp_path):
    with pytest.raises(RecipeError, match="recipe not found: "):
        load_recipe(str(tmp_path / "nope.yaml"))
    with pytest.raises(RecipeError, match=r"is a folder; give the path of the recipe file \(\.yaml\)"):
        load_recipe(str(tmp_path))


# -- overrides (--set) ------------------------------------------------------------------------------

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


def test_set_to_a_place_the_recipe_does_not_have_is_refused(tmp_path, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          process=[{"text_length_filter": {"min_len": 8}}])
    with pytest.raises(RecipeError, match=r"--set process\.3\.text_length_filter\.min_len: the recipe has 1 op "
                                          r"\(process\.0 to process\.0\), none at 3; text_length_filter is at process\.0"):
        load_recipe(str(recipe), {"process.3.text_length_filter.min_len": 3})


def test_set_parses_key_equals_yaml_value():
    assert parse_set(["np=2", "export_dropped=false", "devices=[cpu]", "project_name=", "ray_address='a:1'"]) == \
        {"np": 2, "export_dropped": False, "devices": ["cpu"], "project_name": "", "ray_address": "a:1"}
    with pytest.raises(RecipeError, match="--set expects KEY=VALUE, got 'np'"):
        parse_set(["np"])
    with pytest.raises(RecipeError, match="not valid YAML .*quote a string value"):
        parse_set(["project_name=[unclosed"])


def test_data_juicers_command_line_splits_into_djx_options_and_overrides():
    from djx.core.recipe.overrides import dj_options
    own = {"--config", "--np", "--custom-ops", "--export-path", "--dry-run"}
    rest, overrides = dj_options(["--config", "r.yaml", "--np", "2", "--export_path=o.jsonl", "--dry_run",
                                  "--custom-operator-paths", "a.py", "b.py", "--text_keys", "caption",
                                  "--image_text_similarity_filter.min_score", "0.3", "--open_tracer"], own)
    assert rest == ["--config", "r.yaml", "--np", "2", "--export-path=o.jsonl", "--dry-run",
                    "--custom-ops", "a.py", "--custom-ops", "b.py"]
    assert overrides == {"text_keys": "caption", "image_text_similarity_filter.min_score": 0.3, "open_tracer": True}


def test_an_export_type_that_disagrees_with_the_export_paths_suffix_is_refused_not_ignored():
    """Data-Juicer writes export_type's format whatever the suffix; djx writes the suffix's: a
    disagreement would give another format than the recipe meant, with only a note."""
    assert "recipe key 'export_type': 'parquet' disagrees with export_path 'out/o.jsonl'" in \
        dict_error(export_path="out/o.jsonl", export_type="parquet")
    for path, kind in [("out/o.parquet", "parquet"), ("out/o.jsonl", "jsonl"), ("out/o.json", ".json")]:
        recipe = recipe_from_dict({**PATHS, "export_path": path, "export_type": kind})
        assert dict(recipe.ignored)["export_type"].startswith("the export_path suffix")


def test_a_dataset_path_found_only_from_the_current_folder_says_recipes_resolve_from_their_own(tmp_path, monkeypatch):
    """Data-Juicer's demo recipes name ./demos/data/... from its checkout's root; djx resolves a
    recipe's paths from the recipe's folder, and says so where that is the difference."""
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "d.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "configs").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError) as e:
        recipe_from_dict({"dataset_path": "./demos/d.jsonl", "export_path": "./outputs/o.jsonl"},
                         base_dir=str(tmp_path / "configs"))
    assert f"a recipe's relative paths resolve from its folder ({tmp_path / 'configs'})" in str(e.value)
    assert f"write it as {str(tmp_path / 'demos' / 'd.jsonl')!r}" in str(e.value)
    recipe = recipe_from_dict({"dataset_path": "../demos/d.jsonl", "export_path": "o.jsonl"},
                              base_dir=str(tmp_path / "configs"))
    assert recipe.dataset_path == str(tmp_path / "demos" / "d.jsonl")


def test_an_unknown_key_is_offered_a_misspelling_never_a_look_alike():
    assert "did you mean 'batch_size'?" in dict_error(batch_sise=8)
    for key in ("annotation", "notification"):  # Data-Juicer keys newer than 1.6.1: nothing djx has is meant
        assert dict_error(**{key: {}}) == f"unknown recipe key {key!r}"
