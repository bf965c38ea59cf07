"""Without the `text` extra, djx imports and runs its other ops, and a recipe naming a mapper that
needs the extra fails at load saying what to install: no traceback, nothing written."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.slow
HIDE = 'import sys\nfor name in ("ftfy", "selectolax", "regex"):\n    sys.modules[name] = None\n'


def without_text_extra(tmp_path) -> dict:
    shim = tmp_path / "no_text_shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize("op, module", [("fix_unicode_mapper", "ftfy"), ("clean_html_mapper", "selectolax"),
                                        ("clean_links_mapper", "regex"), ("clean_email_mapper", "regex")])
def test_a_mapper_whose_package_is_missing_fails_at_load_naming_the_extra(tmp_path, op, module):
    env = without_text_extra(tmp_path)
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr  # the shim works
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": "some text here"}) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": "data.jsonl", "export_path": "out/kept.jsonl",
                                      "process": [{"punctuation_normalization_mapper": {}}, {op: {}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{op}: needs the Python package {module!r}" in proc.stderr and "pip install '.[text]' in djx's checkout" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "kept.jsonl").exists()


def test_without_the_extra_the_other_mappers_run(tmp_path):
    env = without_text_extra(tmp_path)
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": " “a” \t b "}, ensure_ascii=False) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": "data.jsonl", "export_path": "out/kept.jsonl",
                                      "process": [{"punctuation_normalization_mapper": {}},
                                                  {"whitespace_normalization_mapper": {}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "kept.jsonl").read_text())["text"] == '"a"   b'
