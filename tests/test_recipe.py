"""Recipes: what a user writes, and the errors that tell them what to change, through runs and the
`djx` command (loading and validating alone: tests/unit/test_recipe.py)."""
from __future__ import annotations

import json
import os

import pytest

from djx import Pipeline, RecipeError, load_recipe


# -- paths ----------------------------------------------------------------------------------------

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




def test_data_juicers_global_keys_at_their_defaults_load_and_the_ones_that_change_the_data_are_refused_when_set(
        tmp_path, write_recipe):
    """The global part of a recipe copied from Data-Juicer 1.6.1's config_all.yaml, at its defaults:
    every key is known (taken, or ignored with a note); custom_operator_paths is read as custom_ops; a
    key that would change what is read or written is refused once it asks for something."""
    (tmp_path / "my_ops.py").write_text("")
    globals_ = dict(export_extra_args={}, load_dataset_kwargs={}, load_jsonl_lenient=False, auto_op_parallelism=True,
                    elastic_juicer_adaptive_batching=False, elastic_juicer_profile_seed=False, skip_op_error=True,
                    decrypt_after_reading=False, encrypt_before_export=False, encryption_key_path=None,
                    image_bytes_key="image_bytes", use_dag=None, read_options={}, override_num_blocks=None,
                    partition={"mode": "auto", "size": None}, checkpoint={"enabled": True, "n_ops": 5},
                    data_probe_algo="uniform", data_probe_ratio=1.0, hpo_config=None, job_id=None, work_dir=None,
                    event_log_dir=None, trace_keys=[], mapper_fusion=False, open_insight_mining=False,
                    op_list_to_mine=[], generated_dataset_config=None, export_aws_credentials=None, resume=False,
                    custom_operator_paths=["my_ops.py"], ray_address="auto", executor_type="default")
    recipe = write_recipe(tmp_path / "dj.yaml", dataset_path="d.jsonl", export_path="out/o.jsonl",
                          process=[{"text_length_filter": {}}], **globals_)
    loaded = load_recipe(str(recipe))
    assert [os.path.basename(p) for p in loaded.custom_ops] == ["my_ops.py"]
    ignored = {key for key, _ in loaded.ignored}
    assert ignored == set(globals_) - {"custom_operator_paths", "ray_address", "executor_type"}
    with pytest.raises(RecipeError, match="custom_operator_paths: expected a path or a list of paths"):
        load_recipe(str(recipe), {"custom_operator_paths": 5})
    for key, value in (("encrypt_before_export", True), ("load_dataset_kwargs", {"columns": ["text"]}),
                       ("generated_dataset_config", {"type": "EmptyFormatter"})):
        with pytest.raises(RecipeError, match=f"recipe key '{key}': .*remove it, or leave it unset"):
            load_recipe(str(recipe), {key: value})
