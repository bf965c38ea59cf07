"""A plug-in's own model loader that raises when a worker starts: the run stops with one line
naming the op and the model, never the loader's traceback."""
from __future__ import annotations

import pytest

from djx import DjxError, Pipeline

PLUGIN = '''
from djx import Filter, ModelSpec, register_model_loader, register_op


@register_model_loader("tplm_toy_model", estimate=lambda spec: 1000)
def load_toy(spec, device):
    if spec.name == "broken":
        raise OSError("weights file toy.bin is corrupt")
    return len(spec.name)


@register_op("tplm_toy_model_filter")
class ToyFilter(Filter):
    stats_keys = ("toy_score",)

    def __init__(self, model: str = "default", **common):
        super().__init__(**common)
        self.model = model

    def model_specs(self):
        return [ModelSpec("tplm_toy_model", self.model)]

    def compute_stats(self, batch):
        weight = batch.pool.get(self.model_specs()[0])
        for sample in batch.samples:
            batch.stats(sample)["toy_score"] = weight

    def keep(self, stats):
        return True
'''


@pytest.mark.slow
def test_a_plugin_loader_that_raises_stops_the_run_in_one_line_naming_op_and_model(tmp_path, write_jsonl,
                                                                                   write_recipe):
    (tmp_path / "toy_ops.py").write_text(PLUGIN)
    write_jsonl(tmp_path / "d.jsonl", [{"text": "one"}, {"text": "two"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/x.jsonl", np=1,
                          start_method="fork", custom_ops=["toy_ops.py"],
                          process=[{"tplm_toy_model_filter": {"model": "broken"}}])
    said = []
    with pytest.raises(DjxError) as e:
        Pipeline.from_recipe(str(recipe)).run(progress=False, log=said.append)
    assert str(e.value) == ("op tplm_toy_model_filter: its model 'broken' (kind 'tplm_toy_model') did not load: "
                            "OSError: weights file toy.bin is corrupt")
    assert not any("Hugging Face" in line for line in said)
