"""What a Ray run would meet at once is said before it starts: `--dry-run` names the executor and
where it would run, and lists as problems a Ray install that does not import and a cluster address
nothing answers at; a real run with a broken Ray install stops in one line, not a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO_DIR


def _djx(tmp_path, *args, pythonpath: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, str(REPO_DIR.parent)) if p)}
    return subprocess.run([sys.executable, "-m", "djx.cli", *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)


def _recipe(tmp_path, write_recipe, write_jsonl, **keys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"text number {i}"} for i in range(4)])
    return write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                        executor="ray", process=[{"text_length_filter": {"min_len": 3}}], **keys)


@pytest.mark.slow
def test_a_ray_install_that_does_not_import_is_one_line_in_a_run_and_a_problem_in_a_dry_run(
        tmp_path, write_recipe, write_jsonl):
    broken = tmp_path / "site" / "ray"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("import _ray_native_library_that_is_not_there\n")
    recipe = _recipe(tmp_path, write_recipe, write_jsonl)
    res = _djx(tmp_path, "process", recipe, "--quiet", pythonpath=str(tmp_path / "site"))
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("djx: error: executor: ray: Ray is installed but does not import "
                                 "(ModuleNotFoundError: No module named '_ray_native_library_that_is_not_there')")
    res = _djx(tmp_path, "process", recipe, "--dry-run", pythonpath=str(tmp_path / "site"))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "executor: ray, on a local Ray that the run starts" in res.stdout
    assert "problem: executor: ray: Ray is installed but does not import" in res.stdout
    assert not list((tmp_path / "out").glob("*")) and not list((tmp_path / "out").glob(".*"))  # nothing written


@pytest.mark.slow
@pytest.mark.ray
def test_a_dry_run_on_ray_names_a_cluster_address_nothing_answers_at(tmp_path, write_recipe, write_jsonl):
    import socket
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        recipe = _recipe(tmp_path, write_recipe, write_jsonl, ray_address=f"127.0.0.1:{port}")
        res = _djx(tmp_path, "process", recipe, "--dry-run")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"executor: ray, on the Ray cluster at 127.0.0.1:{port}" in res.stdout
    assert f"problem: ray_address '127.0.0.1:{port}': nothing answers at 127.0.0.1:{port}" in res.stdout
    res = _djx(tmp_path, "process", recipe, "--dry-run", "--set", "ray_address=null")
    assert res.returncode == 0 and "dry run: no problem found" in res.stdout, res.stdout + res.stderr
