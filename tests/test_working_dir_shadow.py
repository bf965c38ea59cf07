"""`djx process` run from a folder that holds a subfolder named `djx` (an export folder, say):
every worker still imports the installed djx, on the local engine (spawned workers) and on Ray
(whose workers get the driver's working directory on their sys.path)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DJX = str(Path(sys.executable).parent / "djx")


@pytest.mark.parametrize("engine", [pytest.param({"start_method": "spawn", "np": 2}, marks=pytest.mark.spawn),
                                    pytest.param({"executor": "ray", "np": 1}, id="ray",
                                                 marks=[pytest.mark.slow, pytest.mark.ray])])
def test_a_djx_folder_in_the_working_directory_does_not_shadow_djx(tmp_path, text_dataset, write_recipe, engine):
    if engine.get("executor") == "ray":
        pytest.importorskip("ray")
    (tmp_path / "djx").mkdir()
    (tmp_path / "djx" / "kept.jsonl").write_text("")
    recipe = write_recipe(tmp_path / "recipe.yaml", dataset_path=str(text_dataset.path), export_path="djx/out.jsonl",
                          process=[{"text_length_filter": {"min_len": 3}}], **engine)
    proc = subprocess.run([DJX, "process", str(recipe), "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "djx" / "out.summary.json").read_text())
    assert summary["check"]["ok"] and summary["kept"] == len(text_dataset.kept_ids(3))
