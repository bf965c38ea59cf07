"""The `djx` command as a user types it, and djx as a user installs it (not editable)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent
REPO_DIR = Path(__file__).resolve().parent.parent
PLUGIN_SITE = Path(__file__).resolve().parent / "plugins" / "site"


def test_process_runs_a_recipe_and_prints_the_summary(tmp_path, text_dataset, write_recipe,
                                                      read_jsonl, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=2,
                          process=[{"text_length_filter": {"min_len": 4}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    assert "plan: 2 worker(s)" in res.out
    assert f"{text_dataset.records} in = " in res.out and "check: passed" in res.out
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == text_dataset.kept_ids(4)


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_the_installed_console_script_runs_a_recipe_with_a_plugin_module(tmp_path, text_dataset,
                                                                         write_recipe, read_jsonl):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=2, start_method="fork",
                          custom_ops=["djx_test_plugin_ops"],
                          process=[{"text_length_filter": {"min_len": 2}},
                                   {"vowel_ratio_filter": {"max_ratio": 0.5}}])
    env = dict(os.environ, PYTHONPATH=str(PLUGIN_SITE))
    djx = str(VENV_BIN / "djx")
    proc = subprocess.run([djx, "process", str(recipe), "--quiet"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    kept = read_jsonl(tmp_path / "out" / "kept.jsonl")
    assert kept and all(s["__dj__stats__"]["vowel_ratio"] <= 0.5 for s in kept)
    check = subprocess.run([djx, "check", "out/kept.jsonl", "--recipe", str(recipe)], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    bad = subprocess.run([djx, "process", str(recipe), "--set", "exprot_path=x.jsonl"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "did you mean 'export_path'" in bad.stderr and "Traceback" not in bad.stderr


def test_custom_ops_flag_paths_are_relative_to_the_cwd(plugin_project, tmp_path, write_jsonl,
                                                       write_recipe, read_jsonl, djx_cli, monkeypatch):
    """Like --export-path, a path typed on the command line is relative to where it is typed, and
    `djx process --custom-ops P` finds the same file `djx ops --custom-ops P` does."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "<__dj__image> a picture"}, {"text": "none"}])
    recipe = write_recipe(tmp_path / "recipes" / "r.yaml", dataset_path=str(data),
                          export_path=str(tmp_path / "out" / "kept.jsonl"), np=1,
                          process=[{"image_token_count_filter": {"min_count": 1}}])
    monkeypatch.chdir(plugin_project)
    listing = djx_cli("ops", "image_token_count_filter", "--custom-ops", "plugins/my_ops.py")
    assert listing.rc == 0 and "image_token_count_filter" in listing.out, listing.err
    res = djx_cli("process", recipe, "--quiet", "--custom-ops", "plugins/my_ops.py")
    assert res.rc == 0, res.err
    kept = read_jsonl(tmp_path / "out" / "kept.jsonl")
    assert [s["__dj__stats__"]["image_token_count"] for s in kept] == [1]
    # --set custom_ops=[P] is typed here too: the same file, not one beside the recipe
    res = djx_cli("process", recipe, "--quiet", "--restart", "--set", "custom_ops=[plugins/my_ops.py]")
    assert res.rc == 0, res.err


def test_custom_ops_flag_accepts_a_module_name(plugin_site, tmp_path, write_jsonl, write_recipe,
                                               read_jsonl, djx_cli):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "aeiou"}, {"text": "xyz"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="fork",
                          process=[{"vowel_ratio_filter": {"min_ratio": 0.5}}])
    res = djx_cli("process", recipe, "--quiet", "--custom-ops", "djx_test_plugin_ops")
    assert res.rc == 0, res.err
    assert [s["text"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == ["aeiou"]


def test_dry_run_prints_the_plan_and_ops_and_writes_nothing(tmp_path, text_dataset, write_recipe,
                                                            djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=2,
                          process=[{"text_length_filter": {"min_len": 4}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 0, res.err
    assert "plan: 2 worker(s)" in res.out and "text_length_filter(min_len=4)" in res.out
    assert not (tmp_path / "out").exists()


def test_user_errors_exit_1_with_a_message_and_no_traceback(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          process=[{"image_shape_filter": {"min_width": "big"}}])
    res = djx_cli("process", recipe)
    assert res.rc == 1
    assert res.err.startswith("djx: error: ")
    assert "process[0].image_shape_filter.min_width: expected int, got 'big'" in res.err
    assert djx_cli("process", tmp_path / "no_recipe.yaml").rc == 1


# -- a non-editable install ---------------------------------------------------------------------

def _copy_sources(dest: Path) -> Path:
    """The package sources as a release would see them (no tests, builds or caches)."""
    shutil.copytree(REPO_DIR, dest, ignore=shutil.ignore_patterns(
        "tests", ".git", ".ci", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        "outputs", ".venv"))
    return dest


@pytest.mark.slow
def test_a_non_editable_install_ships_every_module_and_runs(tmp_path, write_jsonl, write_recipe):
    src, target = _copy_sources(tmp_path / "src"), tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--no-cache-dir", "--disable-pip-version-check", "-q", "--target",
                          str(target), str(src)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    installed = target / "djx"
    for sub in ("core", "ops"):
        for py in (REPO_DIR / sub).rglob("*.py"):
            rel = py.relative_to(REPO_DIR)
            assert (installed / rel).is_file(), f"{rel} is not installed"
    assert list((installed / "ops" / "filter").glob("*_filter.py"))
    for cfg in (REPO_DIR / "configs").glob("*.yaml"):
        assert (installed / "configs" / cfg.name).is_file(), f"configs/{cfg.name} is not installed"

    env = dict(os.environ, PYTHONPATH=str(target))
    work = tmp_path / "work"
    write_jsonl(work / "d.jsonl", [{"text": "long enough text"}, {"text": "tiny"}])
    recipe = write_recipe(work / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="fork", process=[{"text_length_filter": {"min_len": 5}}])
    script = ("import djx, sys; from djx import Pipeline; print(djx.__file__); "
              "s = Pipeline.from_recipe(sys.argv[1]).run(progress=False, log=lambda *a: None); "
              "print(s['kept'], s['dropped'])")
    proc = subprocess.run([sys.executable, "-c", script, str(recipe)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, counts = proc.stdout.split("\n")[:2]
    assert Path(where).resolve() == (installed / "__init__.py").resolve()
    assert counts == "1 1"
    ops = subprocess.run([sys.executable, "-m", "djx.cli", "ops", "text_length_filter"], cwd=work,
                         env=env, capture_output=True, text=True, timeout=120)
    assert ops.returncode == 0, ops.stderr
    assert "min_len: int = 10" in ops.stdout
    assert json.loads((work / "out" / "kept.summary.json").read_text())["check"]["ok"]


@pytest.mark.spawn
def test_a_script_piped_to_python_runs_spawn_workers(tmp_path, text_dataset):
    """`python - < script.py` (or a notebook) has no __main__ file for spawn workers to import."""
    script = ("from djx import Pipeline\nfrom djx.ops.filter.text_length_filter import TextLengthFilter\n"
              f"s = Pipeline(ops=[TextLengthFilter(min_len=4)], np=2, start_method='spawn').run(\n"
              f"    {str(text_dataset.path)!r}, 'out/kept.jsonl', progress=False, log=lambda *a: None)\n"
              "print(s['input'], s['kept'], s['check']['ok'])\n")
    proc = subprocess.run([sys.executable, "-"], input=script, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(text_dataset.records), str(len(text_dataset.kept_ids(4))), "True"]


def test_an_export_path_under_a_file_is_a_clear_error_before_any_work(tmp_path, text_dataset, write_recipe,
                                                                     djx_cli):
    (tmp_path / "afile").write_text("not a folder")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="afile/out/kept.jsonl", process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "Traceback" not in res.err
    assert "export_path: cannot write under" in res.err and "afile is a file, not a folder" in res.err
