"""Op parameters from a recipe: every bad parameter of an op in one error (built-ins and plug-ins),
and `null` where the op's default is None or an open bound (as the built-ins take it)."""
from __future__ import annotations

import sys
from typing import Literal

import pytest

from djx import Filter, RecipeError, register_op
from djx.core.op.registry import build_op
from djx.core.recipe.build_ops import build_ops
from djx.core.recipe.recipe import recipe_from_dict


@register_op("tp_typed_filter")
class TypedFilter(Filter):
    stats_keys = ("n",)

    def __init__(self, min_words: int = 3, max_words: int = sys.maxsize, mode: Literal["a", "b"] = "a",
                 ratio: float = 0.5, limit: int = None, **common):
        super().__init__(**common)
        self.min_words, self.max_words, self.limit = min_words, max_words, limit

    def compute_sample(self, sample, batch):
        batch.stats(sample)["n"] = len(batch.text(sample).split())

    def keep(self, stats):
        return self.min_words <= stats["n"] <= self.max_words


def _problems(process: list) -> list[str]:
    with pytest.raises(RecipeError) as e:
        build_ops(recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl", "process": process}),
                  load_resources=False)
    return [line.strip()[2:] for line in str(e.value).splitlines()[1:]]


def test_a_recipe_error_lists_every_bad_parameter_of_each_op():
    assert _problems([{"tp_typed_filter": {"min_words": 2.5, "mode": 3, "ratio": "x", "bogus": 1}},
                      {"text_length_filter": {"min_len": "x", "max_len": "y", "bogus": 1}}]) == [
        "process[0].tp_typed_filter.min_words: expected int, got 2.5",
        "process[0].tp_typed_filter.mode: expected 'a' | 'b', got 3",
        "process[0].tp_typed_filter.ratio: expected float, got 'x'",
        "process[0].tp_typed_filter: unknown parameter 'bogus' (parameters: min_words, max_words, mode, ratio, "
        "limit, text_key, image_key, batch_size)",
        "process[1].text_length_filter.min_len: expected int, got 'x'",
        "process[1].text_length_filter.max_len: expected int, got 'y'",
        "process[1].text_length_filter: unknown parameter 'bogus' (parameters: min_len, max_len, "
        "min_closed_interval, max_closed_interval, reversed_range, text_key, image_key, batch_size)",
    ]


def test_an_op_made_in_python_names_every_bad_parameter_too():
    with pytest.raises(RecipeError) as e:
        TypedFilter(min_words="few", ratio="half")
    assert e.value.items == ["tp_typed_filter.min_words: expected int, got 'few'",
                             "tp_typed_filter.ratio: expected float, got 'half'"]


def test_null_is_the_open_bound_djx_ops_shows_as_none():
    op = build_op("tp_typed_filter", {"min_words": 3, "max_words": None})
    assert op.max_words == sys.maxsize and op.params()["max_words"] == sys.maxsize
    assert op.keep({"n": 10 ** 9}) is True


def test_null_is_accepted_where_the_default_is_none():
    op = build_op("tp_typed_filter", {"limit": None})
    assert op.limit is None and op.params() == {"limit": None}


def test_null_is_still_refused_where_the_parameter_needs_a_value():
    with pytest.raises(RecipeError, match=r"tp_typed_filter\.ratio: expected float, got None"):
        build_op("tp_typed_filter", {"ratio": None})
    with pytest.raises(RecipeError, match=r"tp_typed_filter\.min_words: expected int, got None"):
        build_op("tp_typed_filter", {"min_words": None})  # its default is a number: null is no bound here


def test_a_builtin_range_filter_still_takes_null_as_no_bound():
    op = build_op("text_length_filter", {"min_len": 3, "max_len": None})
    assert op.params() == {"min_len": 3, "max_len": None}
