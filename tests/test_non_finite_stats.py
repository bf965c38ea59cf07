"""A filter (a plug-in's, say) that writes NaN or infinity as a stat rejects that sample, naming
the stat, instead of exporting it and failing the whole run's stats check afterwards."""
from __future__ import annotations

import math

import numpy as np
import pytest

from djx import Filter, Pipeline, register_op

from conftest import read_jsonl_file


@register_op("test_sometimes_nan_filter")
class SometimesNan(Filter):
    """Its stat is NaN for texts with 'nan', infinity (numpy's) in a list for 'inf', else the length."""
    stats_keys = ("odd_len",)

    def compute_sample(self, sample, batch):
        text = sample[batch.text_key]
        value = float("nan") if "nan" in text else [1.0, np.float32("inf")] if "inf" in text else float(len(text))
        batch.stats(sample)["odd_len"] = value

    def keep(self, stats):
        return True


def texts():
    return [{"text": w} for w in ["plain one", "has nan", "plain two", "has inf", "plain three"] * 4]


def test_in_memory_a_non_finite_stat_rejects_its_sample_naming_the_stat():
    outcomes = list(Pipeline(ops=[SometimesNan()]).results(texts()))
    rejected = [o for o in outcomes if o.outcome == "rejected"]
    assert [o.sample["text"] for o in outcomes if o.kept] == [t["text"] for t in texts() if "plain" in t["text"]]
    assert len(rejected) == 8 and {o.code for o in rejected} == {"op_error"}
    assert all("test_sometimes_nan_filter wrote a non-finite stat odd_len" in o.reason for o in rejected)
    assert any("= nan" in o.reason for o in rejected) and any("= inf" in o.reason for o in rejected)
    assert all(math.isfinite(o.sample["__dj__stats__"]["odd_len"]) for o in outcomes if o.kept)


@pytest.mark.slow
def test_a_file_run_rejects_those_samples_and_passes_its_check(tmp_path, write_jsonl, write_recipe):
    write_jsonl(tmp_path / "data.jsonl", texts())
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl", np=1,
                          start_method="fork", process=[{"test_sometimes_nan_filter": {}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and (summary["kept"], summary["rejected"]) == (12, 8), summary
    reasons = [r["reason"] for r in read_jsonl_file(tmp_path / "out" / "kept.rejected.jsonl")]
    assert len(reasons) == 8 and all("non-finite stat odd_len" in r for r in reasons)
