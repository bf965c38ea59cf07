"""The in-memory API (Pipeline.results / process) keeps a file run's guards where they apply: an op
that fails for every sample stops it with the systematic-failure error instead of quietly yielding
nothing; a non-finite stat rejects its sample; max_rejected_fraction is a bound; sample_timeout,
which it cannot enforce in-process, is warned about; a mapper never changes the caller's records."""
from __future__ import annotations

import math
import warnings

import pytest

from djx import DjxError, Filter, Mapper, Pipeline
from djx.ops.filter.text_length_filter import TextLengthFilter


class _AlwaysRaises(Filter):
    name = "api_test_always_raises_filter"
    stats_keys = ("never",)

    def compute_sample(self, sample, batch):
        raise KeyError("missing_field")

    def keep(self, stats):
        return True


class _NanStat(Filter):
    name = "api_test_nan_stat_filter"
    stats_keys = ("nn",)

    def compute_sample(self, sample, batch):
        batch.stats(sample)["nn"] = float("nan")

    def keep(self, stats):
        return True


class _Tags(Mapper):
    name = "api_test_tag_mapper"

    def process(self, batch):
        for s in batch.samples:
            s["meta"]["seen"] = True
            s["tags"].append("x")


def _texts(n: int):
    return [{"id": i, "text": f"sample number {i}"} for i in range(n)]


@pytest.mark.parametrize("call", ["process", "results"])
def test_an_op_failing_for_every_sample_stops_as_systematic(call):
    with pytest.raises(DjxError, match=r"api_test_always_raises_filter \(process\[0\]\): 40 of the first 40 .*"
                                       r"systematic.*KeyError"):
        list(getattr(Pipeline(ops=[_AlwaysRaises()]), call)(_texts(40)))


def test_a_long_input_stops_early_without_reading_it_all():
    pulled = 0

    def many():
        nonlocal pulled
        for s in _texts(10_000):
            pulled += 1
            yield s
    with pytest.raises(DjxError, match="systematic"):
        for _ in Pipeline(ops=[_AlwaysRaises()], batch_size=16).process(many()):
            pass
    assert pulled < 1_000


def test_a_probe_of_a_few_samples_gives_each_outcome_and_the_check_can_be_turned_off():
    outcomes = list(Pipeline(ops=[_AlwaysRaises()]).results(_texts(3)))
    assert [o.code for o in outcomes] == ["op_error"] * 3 and "missing_field" in outcomes[0].reason
    pipe = Pipeline(ops=[_AlwaysRaises()], stop_on_systematic_failure=False)
    assert list(pipe.process(_texts(200))) == [] and pipe.last_counts["rejected"] == 200


def test_a_non_finite_stat_rejects_its_sample_and_stops_when_every_sample_has_one():
    [outcome] = Pipeline(ops=[_NanStat()]).results(_texts(1))
    assert outcome.outcome == "rejected" and "nn" in outcome.reason
    assert not (outcome.sample and any(isinstance(v, float) and math.isnan(v)
                                       for v in (outcome.sample.get("__dj__stats__") or {}).values()))
    with pytest.raises(DjxError, match="api_test_nan_stat_filter.*systematic"):
        list(Pipeline(ops=[_NanStat()]).process(_texts(40)))


def test_max_rejected_fraction_bounds_an_in_memory_run():
    samples = [{"text": "long enough"}] * 6 + [{"no_text": 1}] * 4
    assert len(list(Pipeline(ops=[TextLengthFilter(min_len=1)]).process(samples))) == 6
    with pytest.raises(DjxError, match=r"4 of 10 samples \(40.0%\) were rejected, more than max_rejected_fraction 0.2"):
        list(Pipeline(ops=[TextLengthFilter(min_len=1)], max_rejected_fraction=0.2).process(samples))


def test_sample_timeout_is_warned_about_as_not_enforced_in_memory():
    with pytest.warns(RuntimeWarning, match="sample_timeout 3.0 is not enforced by results\\(\\)/process\\(\\)"):
        Pipeline(ops=[TextLengthFilter(min_len=1)], sample_timeout=3).process(_texts(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(Pipeline(ops=[TextLengthFilter(min_len=1)]).process(_texts(1)))  # the default: no warning


def test_a_mapper_changing_nested_objects_leaves_the_callers_records_as_they_were():
    records = [{"text": "hello there", "meta": {}, "tags": []}]
    [out] = Pipeline(ops=[_Tags()]).process(records)
    assert out["meta"] == {"seen": True} and out["tags"] == ["x"]
    assert records == [{"text": "hello there", "meta": {}, "tags": []}]
