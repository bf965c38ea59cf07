"""The command line a Data-Juicer user types: --version, --config, help for the recipe, np for
num_proc, paths typed on the command line relative to the current folder; and a worker whose run
was killed dies quietly."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import djx


def test_version_is_printed(capsys):
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"djx {djx.__version__}"


def test_config_flag_is_the_recipe_argument(tmp_path, text_dataset, write_recipe, djx_cli, read_jsonl):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path), export_path="out/kept.jsonl",
                          np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 4}}])
    res = djx_cli("process", "--config", recipe, "--quiet")
    assert res.rc == 0, res.err
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == text_dataset.kept_ids(4)
    other = write_recipe(tmp_path / "other.yaml", dataset_path="x.jsonl", export_path="y.jsonl")
    res = djx_cli("process", recipe, "--config", other)
    assert res.rc == 1 and "two recipes given" in res.err
    res = djx_cli("process")
    assert res.rc == 1 and "no recipe given" in res.err and "--config" in res.err


def test_process_help_says_what_the_recipe_is():
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    help_text = " ".join(proc.stdout.split())
    assert "the recipe, a YAML file in Data-Juicer's format" in help_text
    assert "--config RECIPE" in help_text and "relative to the current folder" in help_text


def test_num_proc_at_the_top_level_suggests_np(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="k.jsonl", num_proc=4)
    res = djx_cli("process", recipe)
    assert res.rc == 1 and "unknown recipe key 'num_proc'; did you mean 'np'?" in res.err


def test_command_line_options_given_as_recipe_keys_point_at_the_option(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="k.jsonl")
    res = djx_cli("process", recipe, "--set", "limit=5")
    assert res.rc == 1 and "'limit' is not a recipe key but an option of the command: djx process RECIPE --limit N" \
        in res.err, res.err


def test_djx_alone_lists_the_commands():
    proc = subprocess.run([sys.executable, "-m", "djx.cli"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for cmd in ("process", "ops", "check", "analyze", "explain"):
        assert f"\n    {cmd} " in proc.stdout, proc.stdout


def test_paths_typed_on_the_command_line_are_relative_to_the_current_folder(tmp_path, text_dataset, write_recipe,
                                                                           djx_cli, read_jsonl, monkeypatch):
    recipe = write_recipe(tmp_path / "recipes" / "r.yaml", dataset_path="nowhere.jsonl", export_path="x.jsonl",
                          np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 4}}])
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "mine.jsonl").write_bytes(text_dataset.path.read_bytes())
    monkeypatch.chdir(work)
    res = djx_cli("process", recipe, "--set", "dataset_path=data/mine.jsonl", "--export-path", "out/a.jsonl", "--quiet")
    assert res.rc == 0, res.err
    assert [s["id"] for s in read_jsonl(work / "out" / "a.jsonl")] == text_dataset.kept_ids(4)
    res = djx_cli("process", recipe, "--set", "dataset_path=data/mine.jsonl", "--set", "export_path=out/b.jsonl",
                  "--quiet")
    assert res.rc == 0, res.err
    assert (work / "out" / "b.jsonl").read_bytes() == (work / "out" / "a.jsonl").read_bytes()
    assert not (tmp_path / "recipes" / "out").exists()


@pytest.mark.spawn
def test_a_worker_whose_run_is_gone_exits_quietly(tmp_path):
    """The run (the worker's parent end of the pipe) is gone while the worker finishes a batch:
    the worker exits 0 without a BrokenPipe traceback."""
    script = textwrap.dedent("""
        import os, sys, dill, multiprocess as mp
        from djx.core.recipe.context import RunContext
        from djx.core.run.chain import OpChain
        from djx.core.executors.local.worker import Status, Task, recv, send, worker_main
        from djx.core.executors.process import WorkerSetup
        from djx.core.records import Item
        from djx.ops.filter.text_length_filter import TextLengthFilter
        if __name__ == "__main__":
            ctx = mp.get_context("spawn")  # as with model ops: the worker holds no copy of the run's end
            parent_end, child_end = ctx.Pipe()
            chain = dill.dumps(OpChain([TextLengthFilter(min_len=1)], RunContext()))
            status = ctx.Value(Status, lock=False)
            setup = WorkerSetup(chain, warmup=False)
            proc = ctx.Process(target=worker_main, args=(setup, 0, child_end, status, os.getpid()))
            proc.start()
            child_end.close()
            recv(parent_end)  # Ready
            send(parent_end, Task(1, [Item(i, record={"text": "x" * 10}) for i in range(200)]))
            parent_end.close()  # the run is gone before the result comes back
            proc.join(60)
            print("exitcode", proc.exitcode)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert "exitcode 0" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_an_open_upper_bound_is_shown_as_none(djx_cli):
    res = djx_cli("ops", "image_shape_filter")
    assert res.rc == 0
    assert "max_width: int = none (unbounded)" in res.out and str(sys.maxsize) not in res.out


def test_the_check_and_the_summary_read_as_sentences(tmp_path, write_jsonl, write_recipe, djx_cli):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "long enough text"}, {"text": "no"}, {"text": "long again"}])
    data.write_text(data.read_text().replace("\n", "\n\n", 1))  # exactly one blank line
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                          start_method="fork", process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    assert "(1 blank line skipped)" in res.out
    check = djx_cli("check", tmp_path / "out" / "k.jsonl", "--recipe", recipe)
    assert check.rc == 0 and "check passed: 3 input = 2 kept + 1 dropped + 0 rejected" in check.out
    wrong = djx_cli("check", tmp_path / "out" / "k.jsonl", "--recipe", recipe, "--input-count", "5")
    assert wrong.rc == 1 and "count mismatch: input 5 != kept 2 + dropped 1 + rejected 0 = 3" in wrong.out
    assert "positions -1" not in wrong.out


@pytest.mark.slow
@pytest.mark.models
def test_a_run_that_keeps_nothing_of_many_says_the_model_may_not_fit_the_data(tmp_path, write_recipe, djx_cli):
    """The demo's tiny CLIP on real photos with the demo's bound keeps nothing: the table says so."""
    import json
    import shutil
    from pathlib import Path
    assets = Path(__file__).parent / "assets"
    photos = sorted((assets / "faces").glob("*.jpg"))
    for p in photos:
        shutil.copy(p, tmp_path / p.name)
    captions = ["an astronaut in front of a flag", "a cup of coffee on a saucer", "a cat on a blanket"]
    rows = [{"text": f"<__dj__image> {captions[i % 3]}", "images": [photos[i % len(photos)].name]} for i in range(24)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl", np=1,
                          process=[{"image_text_similarity_filter": {"hf_clip": str(assets / "models" / "tiny-clip"),
                                                                     "min_score": 0.2}}])
    res = djx_cli("process", recipe)
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "k.summary.json").read_text())
    assert summary["kept"] == 0 and summary["dropped"] == 24
    assert ("warning: the run kept none of its 24 samples; image_text_similarity_filter dropped 24 of the 24 it saw: "
            "check its model and bounds (the demo's tiny models mean nothing on real photos)") in res.out + res.err


@pytest.mark.slow
def test_analyze_check_and_explain_take_the_recipe_that_ran(tmp_path, write_jsonl, write_recipe, djx_cli):
    """`djx process recipe.yaml` then `djx analyze recipe.yaml` (or `--config recipe.yaml`, as
    Data-Juicer's tools take it): the export the recipe wrote is read, with the recipe's thresholds."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": "long enough text" if i % 2 else "no"}
                                              for i in range(6)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/k.jsonl", np=1,
                          start_method="fork", process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("analyze", recipe)
    assert res.rc == 1 and "run `djx process" in res.err and "--report" in res.err
    assert "must end" not in res.err and len(res.err.strip().splitlines()) == 1
    assert djx_cli("process", recipe, "--quiet").rc == 0
    for args in ((recipe,), ("--config", recipe)):
        res = djx_cli("analyze", *args)
        assert res.rc == 0, res.err
        assert (tmp_path / "out" / "k.analysis" / "report.html").is_file()
        (tmp_path / "out" / "k.analysis" / "report.html").unlink()
        res = djx_cli("check", *args)
        assert res.rc == 0 and "check passed: 6 input = 3 kept + 3 dropped + 0 rejected" in res.out
        res = djx_cli("explain", *args, "0")
        assert res.rc == 0 and "text_length_filter" in res.out and "dropped" in res.out, res.err
    other = write_recipe(tmp_path / "other.yaml", dataset_path=str(data), export_path="elsewhere/k.jsonl")
    res = djx_cli("analyze", recipe, "--config", other)
    assert res.rc == 1 and "two recipes given" in res.err


def test_data_juicers_command_line_overrides_are_taken_as_it_types_them(tmp_path, text_dataset, write_recipe,
                                                                        djx_cli, read_jsonl, monkeypatch):
    # dj-process --config r.yaml --np 1 --export_path p --OP.PARAM V: each a recipe override
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="nowhere.jsonl", export_path="unused.jsonl",
                          np=4, start_method="fork", process=[{"text_length_filter": {"min_len": 100}}])
    monkeypatch.chdir(tmp_path)
    res = djx_cli("process", "--config", recipe, "--quiet", "--np", "1", "--dataset_path", text_dataset.path,
                  "--export_path", "out/kept.jsonl", "--text_length_filter.min_len", "4",
                  "--export_dropped=false")
    assert res.rc == 0, res.err
    assert [s["id"] for s in read_jsonl(tmp_path / "out" / "kept.jsonl")] == text_dataset.kept_ids(4)
    assert not (tmp_path / "out" / "kept.dropped.jsonl").exists()
    res = djx_cli("process", "--config", recipe, "--no_such_key", "1")
    assert res.rc == 1 and "unknown recipe key 'no_such_key'" in res.err


def test_an_op_named_once_takes_set_without_its_index_and_a_wrong_index_names_the_op_there(
        tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="k.jsonl", process=[
        {"text_length_filter": {"min_len": 4}}, {"words_num_filter": {}}, {"text_length_filter": {"max_len": 9}}])
    from djx.core.recipe.recipe import load_recipe
    assert load_recipe(recipe, {"words_num_filter.min_num": 2}).process[1] == ("words_num_filter", {"min_num": 2})
    res = djx_cli("process", recipe, "--set", "text_length_filter.min_len=3")
    assert res.rc == 1 and "text_length_filter appears 2 times in the recipe; say which: " \
        "process.0.text_length_filter.min_len, process.2.text_length_filter.min_len" in res.err, res.err
    res = djx_cli("process", recipe, "--set", "process.2.words_num_filter.min_num=3")
    assert res.rc == 1 and "process.2 is text_length_filter, not words_num_filter; words_num_filter is at " \
        "process.1 (--set process.1.words_num_filter.min_num=...)" in res.err, res.err
    res = djx_cli("process", recipe, "--set", "process.3.words_num_filter.min_num=3")
    assert res.rc == 1 and "the recipe has 3 ops (process.0 to process.2), none at 3" in res.err, res.err
