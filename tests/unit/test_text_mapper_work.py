"""The pattern and HTML mappers on texts built to make them hang (the red team's `a.a.a...` for
links, a long name before `@` for emails, nested `<div>` for HTML): Data-Juicer's output, in work
that grows linearly with the text, and a rejection with a reason past the op's work budget."""
from __future__ import annotations

import random

import pytest

from djx import build_op
from djx.ops.common.work_budget import WorkBudget
from djx.ops.mapper.clean_email_mapper import CleanEmailMapper
from djx.ops.mapper.clean_links_mapper import CleanLinksMapper
from unit.test_text_mappers import run

regex = pytest.importorskip("regex")


def _texts(alphabet, count, seed, longest):
    rnd = random.Random(seed)
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, longest))) for _ in range(count)]


LINK_PIECES = list("ab.w:/()-_ 9%<>!,;WK\té\u212aſ") + ["www.", "http://", "ab.com/", "(x)", "www12."]
EMAIL_PIECES = list("aB.@-+_9 .zé") + ["a@b.cd", ".c", "@@"]


@pytest.mark.parametrize("finder, cls, pieces", [
    ("djx.ops.common.link_spans:link_spans", CleanLinksMapper, LINK_PIECES),
    ("djx.ops.common.email_spans:email_spans", CleanEmailMapper, EMAIL_PIECES)])
def test_linear_matchers_find_what_the_data_juicer_pattern_finds(finder, cls, pieces):
    module, name = finder.split(":")
    find = getattr(__import__(module, fromlist=[name]), name)
    pattern = regex.compile(cls.default_pattern, flags=regex.DOTALL)
    for text in _texts(pieces, 6000, seed=11, longest=40):
        assert list(find(text, WorkBudget(10**9, "t"))) == [m.span() for m in pattern.finditer(text)], text


@pytest.mark.parametrize("finder, unit", [
    ("djx.ops.common.link_spans:link_spans", "a."), ("djx.ops.common.link_spans:link_spans", "ab:/"),
    ("djx.ops.common.link_spans:link_spans", "a.b/"), ("djx.ops.common.email_spans:email_spans", "a"),
    ("djx.ops.common.html_work:charge_html_parse", "<div>a</div>")])
def test_work_grows_linearly_with_the_text(finder, unit):
    module, name = finder.split(":")
    find = getattr(__import__(module, fromlist=[name]), name)

    def steps(n):
        text = unit * n + {"a": "@" + "a" * n, "a.": "ab/ x"}.get(unit, "")
        budget = WorkBudget(10**12, "t")
        result = find(text, budget)
        if result is not None:
            list(result)
        return budget.spent

    small, large = steps(2000), steps(8000)
    assert small > 0 and large <= 8 * small


def test_a_custom_pattern_that_backtracks_is_rejected_with_a_reason():
    op = build_op("clean_links_mapper", {"pattern": "(a|a)+b", "pattern_timeout": 0.2})
    out, rejected = run([op], ["a" * 40 + "c", "fine"])
    assert out == [None, "fine"]
    assert rejected[0]["code"] == "work_budget" and "pattern_timeout" in rejected[0]["reason"]


def test_html_nested_past_the_budget_is_rejected_and_shallow_html_is_parsed():
    pytest.importorskip("selectolax")
    op = build_op("clean_html_mapper", {})
    out, rejected = run([op], ["<div>" * 200_000 + "x", "<div><p>a &amp; b</p></div>" * 2000])
    assert out[0] is None and out[1] == "a & b" * 2000
    assert rejected[0]["code"] == "work_budget" and "work_budget=" in rejected[0]["reason"]
