"""The Python API's errors, as a user meets them: each is a djx.DjxError subclass that can be caught
by the name djx exports, and says what to do."""
from __future__ import annotations

import pytest

import djx
from djx import Filter, Pipeline


class _RaisesOnStars(Filter):
    stats_keys = ("stars_len",)

    def compute_sample(self, sample, batch):
        if "star" in batch.text(sample):
            raise ValueError("no stars here")
        batch.stats(sample)["stars_len"] = len(batch.text(sample))

    def keep(self, stats):
        return True


def test_on_error_fail_raises_failfast_exported_from_djx():
    pipe = Pipeline(ops=[_RaisesOnStars()], on_error="fail")
    with pytest.raises(djx.FailFast, match="no stars here"):
        list(pipe.process([{"text": "fine"}, {"text": "a star"}]))
    assert issubclass(djx.FailFast, djx.DjxError) and "FailFast" in djx.__all__
