"""A plug-in op missing a part of its contract is refused when it is made, saying what to add,
instead of rejecting every sample with an empty reason (or writing stats djx then disowns)."""
from __future__ import annotations

import pytest

from djx import Filter, Mapper, Pipeline, RecipeError, register_op
from djx.core.errors import UsageError


class NoKeepFilter(Filter):
    stats_keys = ("n",)

    def compute_sample(self, sample, batch):
        batch.stats(sample)["n"] = 1


class NoProcessMapper(Mapper):
    pass


@register_op("tc_no_stats_keys_filter")
class NoStatsKeysFilter(Filter):
    def compute_sample(self, sample, batch):
        batch.stats(sample)["nl"] = len(batch.text(sample))

    def keep(self, stats):
        return stats["nl"] > 3


class OneStringStatsKeysFilter(NoStatsKeysFilter):
    stats_keys = "nl"


def test_a_filter_without_keep_is_refused_saying_what_to_write():
    with pytest.raises(UsageError, match=r"^NoKeepFilter gives no verdict: a Filter defines keep\(stats\), "
                                         r"returning True to keep the sample, False or \(False, reason\)"):
        NoKeepFilter()


def test_a_mapper_without_process_is_refused_saying_what_to_write():
    with pytest.raises(UsageError, match=r"^NoProcessMapper transforms nothing: a Mapper defines process\(batch\)"):
        NoProcessMapper()


def test_a_filter_without_stats_keys_is_refused_saying_what_to_set():
    with pytest.raises(UsageError, match=r"^tc_no_stats_keys_filter names no stats: .*"
                                         r"stats_keys = \(\"num_words\",\)"):
        NoStatsKeysFilter()
    with pytest.raises(UsageError, match="names no stats"):
        OneStringStatsKeysFilter()  # "nl" would read as the stats 'n' and 'l'


def test_a_recipe_naming_such_a_plugin_fails_at_load_in_one_line():
    with pytest.raises(RecipeError) as e:
        Pipeline(process=[{"tc_no_stats_keys_filter": {}}])
    assert str(e.value).startswith("process[0].tc_no_stats_keys_filter: the op could not be made: UsageError: "
                                   "tc_no_stats_keys_filter names no stats")
    assert "\n" not in str(e.value)


def test_complete_plugins_are_made_as_before():
    class Complete(NoStatsKeysFilter):
        stats_keys = ("nl",)

    class Upper(Mapper):
        def process(self, batch):
            for sample in batch.samples:
                sample[batch.text_key] = batch.text(sample).upper()

    outcomes = [(r.outcome, r.sample.get("text")) for r in Pipeline(ops=[Upper(), Complete()]).results(
        [{"text": "hello"}, {"text": "hi"}])]
    assert outcomes == [("kept", "HELLO"), ("dropped", "HI")]
