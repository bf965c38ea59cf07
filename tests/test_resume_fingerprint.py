"""A resume continues a run only with what decided its outputs unchanged: the plug-in's code, the
local model files and djx's version join the recipe and the input in the fingerprint, and a
refused resume names what changed."""
import json
import os
import shutil
from pathlib import Path

import pytest

from djx import Pipeline, ResumeError

MODELS = Path(__file__).parent / "assets" / "models"

PLUGIN = '''
from djx import Filter, register_op

LIMIT = {limit}

@register_op("{name}")
class IdBelowFilter(Filter):
    """Keeps samples whose id is below LIMIT."""

    stats_keys = ("id_seen",)

    def compute_stats(self, batch):
        for s in batch.samples:
            batch.stats(s)["id_seen"] = s["id"]

    def keep(self, stats):
        return stats["id_seen"] < LIMIT
'''


def stop_midway(tmp_path, recipe: dict) -> dict:
    """Run until the bad line 31 stops it (on_error: fail); the batches before it stay saved."""
    lines = [json.dumps({"id": i, "text": f"sample {i}", "images": []}) for i in range(60)]
    lines[30] = '{"id": 30, "text": '
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception, match="line 31"):
        Pipeline.from_recipe(str(write(tmp_path, recipe)), {"on_error": "fail"}).run(progress=False,
                                                                                      log=lambda *a: None)
    assert (tmp_path / "out" / ".o.djx-state" / "manifest.json").exists()
    return recipe


def write(tmp_path, recipe: dict) -> Path:
    import yaml
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_a_changed_plugin_is_not_resumed_and_the_refusal_names_it(tmp_path):
    plugin = tmp_path / "rule.py"
    plugin.write_text(PLUGIN.format(limit=40, name="id_below_filter"))
    recipe = stop_midway(tmp_path, {"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                    "batch_size": 4, "start_method": "fork", "custom_ops": ["rule.py"],
                                    "process": [{"id_below_filter": {}}]})
    plugin.write_text(PLUGIN.format(limit=20, name="id_below_filter"))
    with pytest.raises(ResumeError, match="the code of op id_below_filter changed"):
        Pipeline.from_recipe(str(write(tmp_path, recipe))).run(progress=False, log=lambda *a: None)
    plugin.write_text(PLUGIN.format(limit=40, name="id_below_filter"))  # as it was: the resume goes on
    summary = Pipeline.from_recipe(str(write(tmp_path, recipe)), {"on_error": "reject"}).run(
        progress=False, log=lambda *a: None)
    assert summary["resumed"] and summary["input"] == 60 and summary["kept"] == 39


@pytest.mark.slow
@pytest.mark.models
def test_changed_model_files_are_not_resumed(tmp_path):
    shutil.copytree(MODELS / "tiny-clip", tmp_path / "clip")
    (tmp_path / "d").mkdir()
    recipe = stop_midway(tmp_path, {"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                    "batch_size": 4, "process": [{"image_text_similarity_filter": {
                                        "hf_clip": "clip", "min_score": 0.0}}]})
    weights = next(p for p in (tmp_path / "clip").iterdir() if p.suffix == ".safetensors")
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # retrained, say
    with pytest.raises(ResumeError, match="the model folder .*clip changed"):
        Pipeline.from_recipe(str(write(tmp_path, recipe))).run(progress=False, log=lambda *a: None)


def test_a_resumed_run_reports_whole_run_time_and_this_session_s_rate(tmp_path):
    plugin = tmp_path / "rule.py"
    plugin.write_text(PLUGIN.format(limit=40, name="id_below_timed_filter"))
    recipe = stop_midway(tmp_path, {"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                    "batch_size": 4, "start_method": "fork", "custom_ops": ["rule.py"],
                                    "process": [{"id_below_timed_filter": {}}]})
    saved = json.loads((tmp_path / "out" / ".o.djx-state" / "manifest.json").read_text())
    first = saved["counts"]["seconds"]
    assert first > 0 and saved["read"]["records"] == 28  # the 7 batches before the bad line
    summary = Pipeline.from_recipe(str(write(tmp_path, recipe)), {"on_error": "reject"}).run(
        progress=False, log=lambda *a: None)
    session = summary["session"]
    assert session["samples"] == 60 - 28
    assert summary["seconds"] == pytest.approx(first + session["seconds"], abs=2e-3)
    assert summary["samples_per_second"] == pytest.approx(session["samples"] / session["seconds"], rel=0.05)
