"""The op registry and plug-in ops: found by name (with suggestions), listed with their parameters,
loaded from a file or a module, and usable in spawn workers."""
from __future__ import annotations

import pytest

from djx import Batch, Filter, Mapper, Pipeline, RecipeError, get_op_class, register_op, registered_ops
from djx.core.op.params import describe_doc, describe_params, shown
from djx.ops.filter.text_length_filter import TextLengthFilter


@register_op("shout_mapper")
class ShoutMapper(Mapper):
    """Upper-case the text (an op registered from Python, used by name in a recipe)."""

    def process(self, batch: Batch) -> None:
        for sample in batch.samples:
            sample[batch.text_key] = batch.text(sample).upper()


# -- registration -------------------------------------------------------------------------------

def test_a_name_taken_by_another_class_cannot_be_registered():
    class Impostor(Filter):
        stats_keys = ("text_len",)

    with pytest.raises(RecipeError, match="'text_length_filter' is already registered"):
        register_op("text_length_filter")(Impostor)
    assert get_op_class("text_length_filter") is TextLengthFilter


def test_an_alias_taken_by_another_op_cannot_be_registered():
    class Other(Filter):
        pass

    with pytest.raises(RecipeError, match="'image_shape_filter' is already registered"):
        register_op("my_other_shape_filter", aliases=("image_shape_filter",))(Other)
    with pytest.raises(RecipeError, match="unknown op 'my_other_shape_filter'"):
        get_op_class("my_other_shape_filter")


def test_registering_the_same_class_again_is_harmless():
    """A plug-in module imported again (a worker, a reload) registers the same class again."""
    register_op("text_length_filter")(TextLengthFilter)
    assert get_op_class("text_length_filter") is TextLengthFilter


def test_only_ops_can_be_registered():
    with pytest.raises(TypeError, match="Filter or Mapper"):
        register_op("not_an_op")(dict)


def test_unknown_op_name_suggests_the_closest_names():
    with pytest.raises(RecipeError) as e:
        get_op_class("image_shap_filter")
    assert "image_shape_filter" in str(e.value)
    assert "djx ops" in str(e.value)


def test_an_op_registered_from_python_is_usable_by_name_in_a_recipe(tmp_path, write_jsonl,
                                                                      write_recipe, read_jsonl):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "quiet please"}, {"text": "hush"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl",
                          np=2, start_method="fork",
                          process=["shout_mapper", {"text_length_filter": {"min_len": 5}}])
    Pipeline.from_recipe(str(recipe)).run(progress=False)
    kept = read_jsonl(tmp_path / "out" / "k.jsonl")
    assert [s["text"] for s in kept] == ["QUIET PLEASE"]


# -- djx ops ----------------------------------------------------------------------------------------

def _blocks(listing: str) -> dict[str, str]:
    """`djx ops` output split into one block of text per op (an op's header is not indented)."""
    blocks, name = {}, None
    for line in listing.splitlines():
        if line and not line[0].isspace():
            name = line.split()[0]
            blocks[name] = line + "\n"
        elif name and line.strip():
            blocks[name] += line + "\n"
    return blocks


def test_djx_ops_lists_every_op_with_description_parameters_and_defaults(djx_cli):
    res = djx_cli("ops")
    assert res.rc == 0, res.err
    blocks = _blocks(res.out)
    ops = registered_ops()
    assert set(ops) <= set(blocks)
    for name, cls in ops.items():
        block = blocks[name]
        description, _ = describe_doc(cls.__doc__)  # its first sentence, whole
        if cls.__module__.startswith("djx.ops."):  # a built-in describes itself (other tests' plug-ins may not)
            assert description and f"    {description}\n" in block, f"{name} has no description"
        for param, _type, default in describe_params(cls):
            assert f"{param}: " in block and shown(default) in block, f"{name}.{param} not listed"
    assert "min_len: int = 10" in blocks["text_length_filter"]
    assert "stats: text_len" in blocks["text_length_filter"]
    assert "ShoutMapper" not in res.out and "shout_mapper  (mapper)" in res.out


def test_djx_ops_name_shows_one_op(djx_cli):
    res = djx_cli("ops", "image_size_filter")
    assert res.rc == 0, res.err
    blocks = _blocks(res.out)
    assert list(blocks) == ["image_size_filter"]
    block = blocks["image_size_filter"]
    for expected in ("stats: image_sizes", "min_size", "'0'", "max_size", "'1TB'", "any_or_all", "'any'"):
        assert expected in block


def test_djx_ops_with_an_unknown_name_suggests_and_fails(djx_cli):
    res = djx_cli("ops", "text_lenght_filter")
    assert res.rc == 1
    assert "text_length_filter" in res.err
    assert "Traceback" not in res.err


# -- plug-ins -----------------------------------------------------------------------------------------

TOKEN_RECORDS = [
    {"id": 0, "text": "<img> a cat and <img> a dog"},
    {"id": 1, "text": "no image here"},
    {"id": 2, "text": "<__dj__image> the default token is not this run's token"},
    {"id": 3, "text": "<img> one picture"},
    {"id": 4, "text": "<img><img><img> three pictures"},
]


@pytest.mark.spawn
def test_plugin_file_from_recipe_runs_in_spawn_workers_with_the_recipes_special_token(
        plugin_project, tmp_path, write_jsonl, write_recipe, read_jsonl):
    """custom_ops paths are relative to the recipe; the workers (spawn, np=2) re-import the
    plug-in and see the recipe's image_special_token, not a default left in some module."""
    data = write_jsonl(tmp_path / "d.jsonl", TOKEN_RECORDS)
    recipe = write_recipe(plugin_project / f"{tmp_path.name}.yaml", dataset_path=str(data),
                          export_path=str(tmp_path / "out" / "k.jsonl"),
                          custom_ops=["plugins/my_ops.py"], image_special_token="<img>",
                          np=2, start_method="spawn", batch_size=2,
                          process=[{"image_token_count_filter": {"min_count": 1}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert summary["workers"] == 2
    kept = read_jsonl(tmp_path / "out" / "k.jsonl")
    dropped = read_jsonl(tmp_path / "out" / "k.dropped.jsonl")
    assert {s["id"]: s["__dj__stats__"]["image_token_count"] for s in kept} == {0: 2, 3: 1, 4: 3}
    assert {s["id"]: s["__dj__stats__"]["image_token_count"] for s in dropped} == {1: 0, 2: 0}


@pytest.mark.slow
@pytest.mark.spawn
def test_plugin_module_by_name_runs_in_spawn_workers(plugin_site, tmp_path, write_jsonl,
                                                     write_recipe, read_jsonl):
    write_jsonl(tmp_path / "d.jsonl", [{"id": 0, "text": "aeiou"}, {"id": 1, "text": "rhythm"},
                                       {"id": 2, "text": "banana"}, {"id": 3, "text": "strength"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl",
                          custom_ops=["djx_test_plugin_ops"], np=2, start_method="spawn", batch_size=1,
                          process=[{"vowel_ratio_filter": {"min_ratio": 0.4}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert summary["workers"] == 2 and summary["check"]["ok"]
    kept = read_jsonl(tmp_path / "out" / "k.jsonl")
    assert {s["id"]: s["__dj__stats__"]["vowel_ratio"] for s in kept} == {0: 1.0, 2: 0.5}
    dropped = read_jsonl(tmp_path / "out" / "k.dropped.jsonl")
    assert {s["id"]: s["__dj__stats__"]["vowel_ratio"] for s in dropped} == {1: 0.0, 3: 0.125}


def test_a_missing_plugin_file_is_named(tmp_path, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          custom_ops=["plugins/nope.py"])
    with pytest.raises(RecipeError, match=r"custom_ops: file not found: .*plugins/nope\.py"):
        Pipeline.from_recipe(str(recipe))


def test_an_unimportable_plugin_module_is_named(tmp_path, write_recipe):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          custom_ops=["no_such_plugin_module_xyz"])
    with pytest.raises(RecipeError, match="cannot import module 'no_such_plugin_module_xyz'"):
        Pipeline.from_recipe(str(recipe))


def test_a_plugin_that_fails_to_import_is_a_recipe_error(tmp_path, write_recipe):
    (tmp_path / "broken_ops.py").write_text("raise ValueError('oops in plug-in')\n")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="o.jsonl",
                          custom_ops=["broken_ops.py"])
    with pytest.raises(RecipeError, match="importing .*broken_ops.py failed: ValueError: oops in plug-in"):
        Pipeline.from_recipe(str(recipe))


def test_the_readme_counts_the_data_juicer_ops_djx_has():
    import re

    from conftest import REPO_DIR
    from djx.core.op.base import Mapper
    from djx.core.op.registry import load_builtin_ops, registered_ops
    load_builtin_ops()
    builtin = {n: c for n, c in registered_ops().items() if c.__module__.startswith("djx.ops.")}
    data_juicers = [n for n in builtin if not n.startswith("ray_") and n != "image_semantic_deduplicator"]
    mappers = [n for n in data_juicers if issubclass(builtin[n], Mapper)]
    readme = (REPO_DIR / "README.md").read_text(encoding="utf-8")
    words = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen",
             14: "fourteen", 15: "fifteen"}
    assert re.search(rf"\n{len(data_juicers)} of Data-Juicer 1\.6\.1's image", readme)
    assert f"and {words.get(len(mappers), len(mappers))} text mappers" in readme
