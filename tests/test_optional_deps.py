"""A base install (no extras) that asks for an optional engine is told what to install: no traceback,
non-zero exit, nothing written."""
import json
import os
import subprocess
import sys

import pytest
import yaml

# Started first by Python (via PYTHONPATH), as if Ray were not installed: `import ray` raises
# ModuleNotFoundError and importlib.util.find_spec("ray") is None, as in an environment without it.
NO_RAY_SITECUSTOMIZE = 'import sys\nsys.modules["ray"] = None\n'


def without_ray(tmp_path) -> dict:
    shim = tmp_path / "no_ray_shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_RAY_SITECUSTOMIZE)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))


def test_executor_ray_without_ray_installed_says_what_to_install(tmp_path):
    env = without_ray(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import ray"], env=env, capture_output=True, text=True)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr  # the shim works
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"text": f"sample number {i}"}) + "\n"
                                                 for i in range(10)))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": "data.jsonl", "export_path": "out/kept.jsonl",
                                      "executor": "ray", "process": [{"text_length_filter": {"min_len": 5}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "pip install '.[ray]' in djx's checkout" in proc.stderr
    assert "Traceback" not in proc.stderr and "ModuleNotFoundError" not in proc.stderr
    assert not (tmp_path / "out" / "kept.jsonl").exists()


RAY_TESTS = ["tests/test_ray_address.py", "tests/test_ray_faults.py", "tests/test_llava_format.py"]


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_the_ray_tests_skip_where_ray_is_absent_or_does_not_import(tmp_path):
    """Without Ray, or with a Ray that is found but fails to import (a half-installed one raises
    ImportError, which pytest.importorskip does not skip), the suite collects and every `ray` test
    skips saying what to install; nothing errors."""
    from helpers import REPO_DIR
    broken = tmp_path / "broken_ray"
    (broken / "ray").mkdir(parents=True)
    (broken / "ray" / "__init__.py").write_text('raise ImportError("libray.so: cannot open shared object file")\n')
    for env in (without_ray(tmp_path), dict(os.environ, PYTHONPATH=str(broken))):
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-m", "ray",
                              *RAY_TESTS], cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0 and "error" not in res.stdout.lower(), res.stdout[-3000:]
        assert "Ray is not installed, or does not import" in res.stdout
        assert "passed" not in res.stdout and "skipped" in res.stdout
