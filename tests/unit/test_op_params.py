"""An op's parameters are checked against the type hints of its __init__, once, whether a recipe or
Python code makes it: an error names the op, the key, the expected type and the value given."""
from __future__ import annotations

import sys
from typing import Literal

import pytest

from djx import Filter, Pipeline, RecipeError, UsageError, build_op
from djx.core.op.params import check_ranges, coerce, describe_params, shown, validate_params
from djx.ops.filter.text_length_filter import TextLengthFilter

from conftest import REPO_DIR

MODELS = REPO_DIR / "tests" / "assets" / "models"


class ScoreFilter(Filter):
    """A plug-in filter as a user writes one: typed keyword parameters, `**common` passed on."""

    stats_keys = ("score",)

    def __init__(self, min_score: float = 0.0, max_score: float = 1.0, mode: Literal["any", "all"] = "any",
                 labels: list[str] | None = None, **common):
        super().__init__(**common)
        self.min_score, self.max_score, self.mode, self.labels = min_score, max_score, mode, labels

    def compute_sample(self, sample, batch):
        return {"score": 0.5}

    def keep(self, stats):
        return True


def error_of(params: dict) -> str:
    with pytest.raises(RecipeError) as e:
        validate_params(ScoreFilter, params, "process[2].score_filter")
    return str(e.value)


def test_a_wrong_type_names_the_op_the_key_the_expected_type_and_the_value():
    assert error_of({"min_score": "high"}) == "process[2].score_filter.min_score: expected float, got 'high'"
    assert error_of({"mode": "every"}) == "process[2].score_filter.mode: expected 'any' | 'all', got 'every'"
    assert error_of({"labels": "cat"}) == "process[2].score_filter.labels: expected list[str] | None, got 'cat'"
    assert error_of({"labels": ["cat", 3]}).endswith("expected list[str] | None, got ['cat', 3]")


def test_an_unknown_parameter_is_named_with_the_closest_one_and_the_full_list():
    msg = error_of({"min_scor": 0.5})
    assert msg.startswith("process[2].score_filter: unknown parameter 'min_scor'; did you mean 'min_score'?")
    assert "(parameters: min_score, max_score, mode, labels, text_key, image_key, batch_size)" in msg


def test_ints_widen_to_float_a_whole_float_is_an_int_and_nothing_else_converts():
    assert validate_params(ScoreFilter, {"min_score": 1, "max_score": 2.5}, "f") == {"min_score": 1.0, "max_score": 2.5}
    assert isinstance(coerce(1, float), float)
    assert coerce(200000.0, int) == 200000 and type(coerce(2e5, int)) is int  # `max_len: 2e5`
    for value, tp in [("1", int), ("0.5", float), (1.5, int), ([1], int), ({"a": 1}, list)]:
        with pytest.raises(TypeError):
            coerce(value, tp)


def test_a_boolean_is_never_a_number():
    """YAML reads `yes` and `true` as booleans; taking one as 1 would pass a typo silently."""
    for tp in (int, float, int | None):
        with pytest.raises(TypeError):
            coerce(True, tp)
    assert "expected float, got True" in error_of({"min_score": True})


def test_optional_and_list_parameters_take_what_their_hints_say():
    assert validate_params(ScoreFilter, {"labels": None}, "f") == {"labels": None}
    assert validate_params(ScoreFilter, {"labels": ("cat", "dog")}, "f") == {"labels": ["cat", "dog"]}


def test_the_base_parameters_are_accepted_through_common_keywords():
    params = {"text_key": "caption", "image_key": "pictures", "batch_size": 4}
    assert validate_params(ScoreFilter, params, "f") == params
    op = ScoreFilter(**params)
    assert (op.text_key, op.image_key, op.batch_size) == ("caption", "pictures", 4)


def test_making_an_op_in_python_validates_like_a_recipe():
    with pytest.raises(RecipeError, match=r"text_length_filter\.min_len: expected int, got 'x'"):
        TextLengthFilter(min_len="x")
    with pytest.raises(RecipeError, match="did you mean 'max_len'"):
        TextLengthFilter(max_lenn=3)
    op = TextLengthFilter(min_len=5)
    assert op.min_len == 5 and op.params() == {"min_len": 5}
    with pytest.raises(RecipeError, match=r"^ScoreFilter\.mode: expected 'any' \| 'all'"):
        ScoreFilter(mode="most")  # an unregistered op is named by its class


def test_positional_parameters_are_refused_with_the_keyword_form():
    with pytest.raises(UsageError, match=r"keyword parameters only, e.g. TextLengthFilter\(min_len=5\)"):
        TextLengthFilter(5)


def test_a_minimum_above_its_maximum_is_refused_naming_both():
    with pytest.raises(RecipeError, match="text_length_filter: min_len 9 is above max_len 3; no sample could pass"):
        TextLengthFilter(min_len=9, max_len=3)
    with pytest.raises(RecipeError, match="min_score 1.5 is above max_score 1.0"):  # against the default maximum
        check_ranges(ScoreFilter, {"min_score": 1.5}, "score_filter")
    TextLengthFilter(min_len=3, max_len=3)  # one length passes: allowed


def test_a_range_bound_given_as_null_is_no_bound_as_data_juicer_reads_it():
    """`max_len: null` in a Data-Juicer recipe: that side is not tested. Only a range filter's min_/max_
    bounds read null so; any other typed parameter still refuses it."""
    def kept(name: str, params: dict, texts: list[str]) -> list[str]:
        return [s["text"] for s in Pipeline(ops=[build_op(name, params)]).process([{"text": t} for t in texts])]

    assert kept("text_length_filter", {"min_len": 3, "max_len": None}, ["ab", "abc", "x" * 100_000]) == ["abc", "x" * 100_000]
    assert kept("words_num_filter", {"min_num": None, "max_num": 2}, ["", "a b", "a b c"]) == ["", "a b"]
    assert build_op("image_size_filter", {"min_size": None, "max_size": "1MB"}).min_bytes is None
    pair = build_op("image_pair_similarity_filter", {"hf_clip": str(MODELS / "tiny-clip"), "max_score": None})
    assert pair.max_score is None and pair.min_score == 0.1
    assert error_of({"max_score": None}) == "process[2].score_filter.max_score: expected float, got None"
    with pytest.raises(RecipeError, match="words_num_filter.tokenization: expected bool, got None"):
        build_op("words_num_filter", {"tokenization": None})


def test_params_are_described_own_first_with_types_and_defaults():
    rows = describe_params(ScoreFilter)
    assert [name for name, _, _ in rows] == ["min_score", "max_score", "mode", "labels",
                                             "text_key", "image_key", "batch_size"]
    assert rows[2] == ("mode", "'any' | 'all'", "any")
    assert rows[3] == ("labels", "list[str] | None", None)


def test_an_open_upper_bound_is_shown_as_none():
    assert shown(sys.maxsize) == "none (unbounded)"
    assert shown(10) == "10" and shown(True) == "True" and shown("10KB") == "'10KB'"
    assert repr(TextLengthFilter(min_len=3, max_len=sys.maxsize)) == \
        "text_length_filter(min_len=3, max_len=none (unbounded))"


def test_djx_ops_shows_each_ops_first_sentence_whole_and_keeps_the_rest():
    import re

    from djx.core.op.params import describe_doc
    from djx.core.op.registry import get_op_class, registered_ops
    for name in registered_ops():
        if not get_op_class(name).__module__.startswith("djx.ops."):
            continue  # other tests' plug-ins, registered in this process, need not describe themselves
        doc = get_op_class(name).__doc__
        lead, rest = describe_doc(doc)
        assert lead.endswith(".") and not lead.endswith((":.", ";.", "..")), (name, lead)
        words = re.findall(r"\w+", doc or "")
        assert re.findall(r"\w+", f"{lead} {rest}") == words, name  # nothing lost, nothing reordered
    lead, _ = describe_doc(get_op_class("character_repetition_filter").__doc__)
    assert lead == "Keep samples whose character n-gram repetition is within [min_ratio, max_ratio]."


def test_a_first_sentence_ends_outside_parentheses_quotes_and_abbreviations():
    from djx.core.op.params import describe_doc
    assert describe_doc("Keep x (a. b) `c: d` e.g. y: z\n    and more.\n\nNext part.") == \
        ("Keep x (a. b) `c: d` e.g. y.", "z and more.\n\nNext part.")
    assert describe_doc("One line, no period") == ("One line, no period.", "")
    assert describe_doc(None) == ("", "")
