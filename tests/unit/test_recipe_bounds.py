"""A recipe file someone else wrote: YAML aliases that expand to gigabytes, a recursive alias, a
device in place of the file or of a model file it names. Each is refused with a short error saying
what to change; a recipe that uses anchors the ordinary way still loads."""
from __future__ import annotations

import pytest

from djx import RecipeError, load_recipe
from djx.core.recipe.recipe import parse_set


def alias_bomb(depth: int) -> str:
    """The red team's shape: each level lists nine aliases of the one before (9**depth leaves)."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, depth + 1)]
    return "\n".join(lines + [f"process: *l{depth}", "dataset_path: d.jsonl", "export_path: o.jsonl"]) + "\n"


def load_error(path) -> str:
    with pytest.raises(RecipeError) as e:
        load_recipe(str(path))
    return str(e.value)


@pytest.mark.parametrize("depth", [7, 9])
def test_an_alias_bomb_is_refused_in_one_short_line(tmp_path, depth):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(depth))
    msg = load_error(path)
    assert len(msg) < 500 and "\n" not in msg
    assert "aliases expand it past" in msg and str(path) in msg


def test_a_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("dataset_path: d.jsonl\nprocess: &p [*p]\n")
    assert "recursive alias" in load_error(path)


def test_anchors_used_the_ordinary_way_still_load(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("dataset_path: d.jsonl\nexport_path: o.jsonl\n"
                    "process:\n  - text_length_filter: &c {min_len: 3, max_len: 100}\n"
                    "  - average_line_length_filter: *c\n")
    recipe = load_recipe(str(path))
    assert [dict(p) for _, p in recipe.process] == [{"min_len": 3, "max_len": 100}] * 2


def test_a_device_named_as_the_recipe_is_refused(tmp_path):
    msg = load_error("/dev/zero")
    assert "not a regular file" in msg and "a device" in msg


def test_a_set_value_with_an_alias_bomb_is_refused():
    value = "[" + ",".join(["&a [" + ",".join(['"x"'] * 50) + "]"] + ["*a"] * 10_001) + "]"
    with pytest.raises(RecipeError, match="aliases"):
        parse_set([f"np={value}"])


def test_a_model_file_that_is_a_device_is_refused_at_load():
    pytest.importorskip("fasttext")
    from djx import build_op
    with pytest.raises(RecipeError, match=r"model_path: '/dev/zero' is a device, not a model file"):
        build_op("language_id_score_filter", {"model_path": "/dev/zero"})


def test_a_fasttext_model_swapped_for_a_fifo_after_the_check_is_refused_when_loaded(tmp_path):
    """The worker loads by an open descriptor it checked: what the name points at after the recipe's
    check does not reach fastText."""
    pytest.importorskip("fasttext")
    import os

    from djx import ModelSpec
    from djx.core.io.regular_file import FileRefused
    from djx.ops.common.text_models import load_fasttext
    os.mkfifo(tmp_path / "lid.bin")
    with pytest.raises(FileRefused, match="a FIFO"):
        load_fasttext(ModelSpec("fasttext", str(tmp_path / "lid.bin")), "cpu")


def test_numbers_with_an_exponent_load_as_numbers_as_data_juicer_reads_them(tmp_path):
    """PyYAML alone reads 2e5 and 1.5e3 as strings; Data-Juicer's recipes write `max_len: 2e5`."""
    from djx.core.recipe.bounded_yaml import safe_load_bounded
    text = "a: 2e5\nb: 1e-3\nc: 1.5e3\nd: -3E+2\ne: .5e1\nf: '2e5'\ng: 1e5x\nh: 7\ni: 2.5\nj: 0x10\n"
    assert safe_load_bounded(text) == {"a": 200000.0, "b": 0.001, "c": 1500.0, "d": -300.0, "e": 5.0,
                                       "f": "2e5", "g": "1e5x", "h": 7, "i": 2.5, "j": 16}
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_path: d.jsonl\nexport_path: o.jsonl\n"
                      "process:\n  - text_length_filter: {min_len: 1e1, max_len: 2e5}\n")
    (op,) = load_recipe(str(recipe)).build_ops()
    assert (op.min_len, op.max_len) == (10, 200000)
    assert parse_set(["text_length_filter.max_len=3e4"]) == {"text_length_filter.max_len": 30000.0}
    with pytest.raises(RecipeError, match="max_len: expected int, got 2.5"):
        load_recipe(str(recipe), overrides={"text_length_filter.max_len": 2.5}).build_ops()
