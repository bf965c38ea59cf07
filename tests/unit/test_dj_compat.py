"""A Data-Juicer recipe runs as it is: the keys that mean nothing to djx are listed as ignored, with
why; a mixture dataset_path ("0.5 a.jsonl 0.5 b.jsonl") is refused with what to do instead (djx
streams one dataset in a fixed order, so it does not sample by weight); Data-Juicer's `dataset:` key
with one local source is read as its dataset_path."""
from __future__ import annotations

import pytest

from djx import RecipeError
from djx.core.recipe.dj_compat import DJ_GLOBAL_KEYS, DJ_OP_KEYS, refuse_mixture
from djx.core.recipe.recipe import recipe_from_dict


@pytest.mark.parametrize("path", ["0.5 a.jsonl 0.5 b.jsonl", "a.jsonl b.parquet", "1 data/a.jsonl"])
def test_a_mixture_is_refused_with_how_to_process_or_sample_the_files(path):
    with pytest.raises(RecipeError) as e:
        refuse_mixture(path)
    msg = str(e.value)
    assert "is a Data-Juicer mixture" in msg and "dataset_path: data/*.jsonl" in msg
    assert "shuf -n N" in msg and ".jsonl > part.jsonl" in msg


def test_paths_that_are_not_mixtures_pass(tmp_path):
    spaced = tmp_path / "my data 2024.jsonl"
    spaced.write_text("")
    for path in ("data.jsonl", "data/*.jsonl", str(spaced), "my holiday photos"):
        assert refuse_mixture(path) is None  # raises RecipeError on a mixture
        recipe = recipe_from_dict({"dataset_path": path, "export_path": "o.jsonl", "process": []}, str(tmp_path))
        assert recipe.dataset_path.endswith(path.split("/")[-1])  # the recipe takes the path as one dataset


def test_data_juicer_op_keys_are_ignored_with_why_unless_the_op_takes_them():
    recipe = recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl", "use_cache": True,
                               "process": [{"text_length_filter": {"min_len": 4, "num_proc": 8, "batch_size": 16}}]})
    (op,) = recipe.build_ops()
    assert (op.min_len, op.batch_size) == (4, 16)  # batch_size is a djx op parameter too: it takes effect
    assert recipe.notes() == [f"use_cache ignored: {DJ_GLOBAL_KEYS['use_cache']}",
                              f"process[0].text_length_filter.num_proc ignored: {DJ_OP_KEYS['num_proc']}"]


def _dataset(*configs, **extra):
    return {"dataset": {"configs": list(configs), **extra}, "export_path": "o.jsonl",
            "process": [{"text_length_filter": {}}]}


def test_data_juicers_dataset_key_with_one_local_source_is_the_dataset_path(tmp_path):
    recipe = recipe_from_dict(_dataset({"type": "local", "path": "data/part.jsonl", "weight": 1.0}), str(tmp_path))
    assert recipe.dataset_path == str(tmp_path / "data" / "part.jsonl")  # relative to the recipe, as dataset_path
    assert recipe.notes() == []


def test_a_dataset_path_wins_over_the_dataset_key_as_in_data_juicer_and_the_run_says_so(tmp_path):
    raw = {**_dataset({"type": "local", "path": "other.jsonl"}), "dataset_path": "mine.jsonl"}
    recipe = recipe_from_dict(raw, str(tmp_path))
    assert recipe.dataset_path == str(tmp_path / "mine.jsonl")
    assert recipe.notes() == ["dataset ignored: dataset_path is set, and takes precedence (as in Data-Juicer)"]


@pytest.mark.parametrize("raw, says", [
    (_dataset({"type": "local", "path": "a.jsonl"}, max_sample_num=100), "shuf -n N"),
    (_dataset({"type": "local", "path": "a.jsonl"}, {"type": "local", "path": "b.jsonl"}), "data/*.jsonl"),
    (_dataset({"type": "remote", "source": "arxiv"}), "download the dataset"),
    (_dataset({"type": "huggingface", "path": "org/name"}), "type: local"),
    (_dataset({"type": "local"}), "needs a path"),
    (_dataset(), "expected Data-Juicer's {configs: [{type: local, path: ...}]}"),
    ({"dataset": "data.jsonl", "export_path": "o.jsonl"}, "expected Data-Juicer's"),
])
def test_a_dataset_key_djx_cannot_read_alike_is_refused_with_what_to_write(raw, says):
    with pytest.raises(RecipeError, match="^dataset: ") as e:
        recipe_from_dict(raw)
    assert says in str(e.value)


def test_data_juicers_validators_are_refused_with_what_removing_them_means():
    with pytest.raises(RecipeError) as e:
        recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl",
                          "validators": [{"type": "required_fields", "required_fields": ["text"]}]})
    assert "recipe key 'validators': Data-Juicer's dataset validators are not in djx: remove the key" in str(e.value)


def test_data_juicer_1_6_per_op_settings_in_its_own_recipes_are_ignored_with_why():
    """Data-Juicer 1.6.1's config_all.yaml gives model ops `memory: '1500MB'`, its Ray MinHash
    `tmp_file_name`; every op of it takes Ray resources and data keys djx has no op for."""
    settings = {"memory": "1500MB", "num_cpus": 1, "num_gpus": 0.5, "runtime_env": {"pip": ["x"]},
                "batch_mode": True, "adaptive_batching": True, "input_columns": ["text"], "output_columns": ["text"],
                "image_bytes_key": "image_bytes", "audio_key": "audios", "video_key": "videos", "query_key": "query",
                "response_key": "response", "history_key": "history", "system_key": "system",
                "instruction_key": "instruction", "prompt_key": "prompt"}
    recipe = recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl", "process": [
        {"image_nsfw_filter": {"max_score": 0.4, **settings}},
        {"ray_bts_minhash_deduplicator": {"tmp_file_name": "./outputs/ray-dedup-tmp/"}}]})
    nsfw, _ = recipe.build_ops(load_resources=False)
    assert nsfw.max_score == 0.4
    notes = recipe.notes()
    assert [n.split(" ignored: ")[0] for n in notes] == [f"process[0].image_nsfw_filter.{k}" for k in settings] + [
        "process[1].ray_bts_minhash_deduplicator.tmp_file_name"]
    assert all(n.split(" ignored: ")[1] for n in notes)


def test_a_recipe_without_ops_says_that_its_run_copies_the_input():
    recipe = recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl"})
    assert not recipe.process and not recipe.build_ops()
    assert recipe.notes() == ["the recipe names no ops (no `process` list, or an empty one): the run copies its "
                              "input, with the input checks (bad records rejected with their reasons)"]
