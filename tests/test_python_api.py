"""The Python API as a user's script: the README's script runs; without its main guard it stops
with a message that says to add it; Pipeline(recipe=PATH); API misuse is a DjxError."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from djx import DjxError, Pipeline, UsageError, register_op
from djx.ops.filter.text_length_filter import TextLengthFilter

from conftest import REPO_DIR

README = (REPO_DIR / "README.md").read_text(encoding="utf-8")


def _script(tmp_path: Path, guarded: bool) -> Path:
    """The README's clean.py, on a recipe of this test (spawn workers, as with model ops)."""
    block = re.search(r"```python\n(# clean\.py.*?)```", README, re.DOTALL).group(1)
    assert 'if __name__ == "__main__":' in block
    call = 'Pipeline(recipe="recipe.yaml").run(progress=False)\n'
    if guarded:
        body = f'if __name__ == "__main__":\n    summary = {call}    print("kept:", summary["kept"])\n'
    else:
        body = f"summary = {call}"
    head = block.split("if __name__")[0]
    path = tmp_path / "clean.py"
    path.write_text(head + body, encoding="utf-8")
    return path


def _run(script: Path):
    return subprocess.run([sys.executable, str(script)], cwd=script.parent, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1"))


@pytest.fixture
def spawn_recipe(tmp_path, text_dataset, write_recipe):
    return write_recipe(tmp_path / "recipe.yaml", dataset_path=str(text_dataset.path), export_path="out/kept.jsonl",
                        np=2, start_method="spawn", process=[{"text_length_filter": {"min_len": 4}}])


@pytest.mark.spawn
def test_the_readme_script_runs_with_its_main_guard(tmp_path, spawn_recipe, text_dataset):
    proc = _run(_script(tmp_path, guarded=True))
    assert proc.returncode == 0, proc.stderr
    assert f"kept: {len(text_dataset.kept_ids(4))}" in proc.stdout


@pytest.mark.spawn
def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path, spawn_recipe):
    proc = _run(_script(tmp_path, guarded=False))
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr and "guard" in proc.stderr
    assert "another djx run is writing" not in proc.stderr
    assert not (tmp_path / "out" / "kept.jsonl").exists()


@pytest.mark.spawn
def test_pipeline_takes_a_recipe_path(tmp_path, spawn_recipe, text_dataset, read_jsonl):
    for recipe in (str(spawn_recipe), spawn_recipe):
        pipe = Pipeline(recipe=recipe, start_method="fork")
        assert [type(op) for op in pipe.ops] == [TextLengthFilter]
        summary = pipe.run(progress=False, log=lambda *a: None, restart=True)
        assert summary["kept"] == len(text_dataset.kept_ids(4))
    with pytest.raises(DjxError, match="recipe not found"):
        Pipeline(recipe=tmp_path / "missing.yaml")
    with pytest.raises(DjxError, match="expected a recipe file path or a Recipe"):
        Pipeline(recipe=3)


def test_api_misuse_is_a_djx_error_that_says_what_to_pass():
    with pytest.raises(UsageError, match=r"pass an instance, e.g. TextLengthFilter\(\)"):
        Pipeline(ops=[TextLengthFilter])
    with pytest.raises(DjxError, match="not an op"):
        Pipeline(ops=["text_length_filter"])
    with pytest.raises(DjxError, match="keyword parameters only"):
        TextLengthFilter(5)
    with pytest.raises(DjxError, match="must decorate a Filter or Mapper"):
        register_op("not_an_op")(dict)
    assert issubclass(UsageError, TypeError)  # what it is in Python, for code that catches TypeError


def test_results_give_every_sample_its_outcome_and_reason_in_input_order(tmp_path):
    from djx import SampleOutcome
    from djx.ops.filter.image_shape_filter import ImageShapeFilter
    pipe = Pipeline(ops=[TextLengthFilter(min_len=5), ImageShapeFilter(min_width=1)])
    samples = [{"text": "hello world", "images": []}, {"text": "hi", "images": []},
               {"text": "hello there", "images": [str(tmp_path / "missing.jpg")]}, {"text": 7}]
    out = list(pipe.results(samples))
    assert all(isinstance(o, SampleOutcome) for o in out)
    assert [(o.position, o.outcome) for o in out] == [(0, "kept"), (1, "dropped"), (2, "rejected"), (3, "rejected")]
    assert out[0].kept and out[0].reason is None and "text_len" in out[0].sample["__dj__stats__"]
    assert out[1].op == "text_length_filter" and "below min_len 5" in out[1].reason
    assert out[1].sample["__dj__stats__"]["text_len"] == 2
    assert out[2].op == "image_shape_filter" and out[2].code and "missing.jpg" in out[2].reason
    assert out[3].sample == {"text": 7} and out[3].reason
    # process() still yields the kept ones, with the counts of the rest
    kept = list(pipe.process(samples))
    assert [s["text"] for s in kept] == ["hello world"]
    assert {k: pipe.last_counts[k] for k in ("input", "kept", "dropped", "rejected")} == \
        {"input": 4, "kept": 1, "dropped": 1, "rejected": 2}
