"""The Ray executor under faults: samples that kill their actor, spread over many batches of a block,
cost at most two actor deaths each and the run finishes without them; the summary counts the deaths
that happened; the early systematic-failure check gives the local verdict; a raylet killed mid-run
ends the run with one error line, every batch received saved, and the rerun resumes exactly."""
from __future__ import annotations

import json
import re

import psutil
import pytest
import yaml

from djx import Pipeline

from conftest import LONG, PLUGINS_DIR, read_jsonl_file
from helpers import GUARD_S, djx, hold, manifest_records, release, wait_for

pytestmark = pytest.mark.ray


def test_poison_samples_over_many_batches_cost_at_most_two_deaths_each_and_the_run_finishes(
        ray_address, tmp_path, write_recipe):
    # Ray cuts the file into blocks of ~100 rows here, a task each: three poison batches in one
    # block (a death retries the whole task), two poison samples in one batch of 16
    n, poison = 400, {10, 40, 75, 230, 231, 350}
    short = set(range(5, n, 40))               # dropped by the length filter
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": i, "text": "tiny" if i in short else LONG, "poison": i in poison}) + "\n"
        for i in range(n)))
    (tmp_path / "deaths").mkdir()
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl",
                          executor="ray", ray_address=ray_address, np=1, batch_size=16,
                          custom_ops=[str(PLUGINS_DIR / "chaos_ops.py")],
                          process=[{"text_length_filter": {"min_len": 5}},
                                   {"poison_filter": {"deaths_dir": str(tmp_path / "deaths")}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)

    rejected = read_jsonl_file(tmp_path / "out" / "kept.rejected.jsonl")
    assert sorted(r["record"]["id"] for r in rejected) == sorted(poison)
    for r in rejected:
        assert r["code"] == "worker_died" and r["op"] == "poison_filter"
        assert "worker died while running poison_filter" in r["reason"] and r["line"] == r["record"]["id"] + 1
    kept = [s["id"] for s in read_jsonl_file(tmp_path / "out" / "kept.jsonl")]
    dropped = [s["id"] for s in read_jsonl_file(tmp_path / "out" / "kept.dropped.jsonl")]
    assert kept == [i for i in range(n) if i not in poison | short] and sorted(dropped) == sorted(short)
    assert (summary["input"], summary["kept"], summary["dropped"], summary["rejected"]) == \
        (n, n - len(poison) - len(short), len(short), len(poison))
    assert summary["check"]["ok"]
    deaths = len(list((tmp_path / "deaths").iterdir()))  # each actor death left a file
    assert len(poison) <= deaths <= 2 * len(poison)
    assert summary["worker_restarts"] == deaths and summary["events"]["actor_deaths"] == deaths


def _boom_head(path, bad: int, good: int):
    path.write_text("".join(json.dumps({"text": f"bad {i}", "boom": True}) + "\n" for i in range(bad))
                    + "".join(json.dumps({"text": f"good sample {i}"}) + "\n" for i in range(good)))
    return path


@pytest.mark.parametrize("bad, good, verdict", [(70, 130, "finishes"), (300, 0, "stops")])
def test_the_early_systematic_failure_check_gives_the_local_verdict_on_ray(ray_address, tmp_path, write_recipe,
                                                                          djx_cli, bad, good, verdict):
    """Windows of 32 samples in input order, as locally: bad records at the head of a good dataset
    (two failing windows, then a clean one) finish; a dataset failing throughout stops after four
    windows, whatever the batches."""
    data = _boom_head(tmp_path / "d.jsonl", bad, good)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl",
                          executor="ray", ray_address=ray_address, np=1, batch_size=7,
                          custom_ops=[str(PLUGINS_DIR / "chaos_ops.py")], process=[{"poison_filter": {}}])
    res = djx_cli("process", recipe, "--quiet")
    if verdict == "finishes":
        assert res.rc == 0, res.err
        summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
        assert summary["kept"] == good and summary["rejected_by_code"] == {"op_error": bad}
    else:
        assert res.rc == 1 and "128 of the first 128 samples" in res.err
        assert not (tmp_path / "out" / "kept.jsonl").exists()


def _descendants_named(pid: int, name: str) -> list[psutil.Process]:
    found = []
    for p in psutil.Process(pid).children(recursive=True):
        try:
            if p.name() == name:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def test_a_raylet_killed_mid_run_ends_it_with_one_error_line_and_the_rerun_resumes_exactly(tmp_path):
    """The run starts a Ray of its own (its raylet is a child of the djx process): file 0 can finish,
    file 2 is held in a stage actor, which ends with its raylet before it can answer."""
    n, per = 300, 100
    (tmp_path / "ds").mkdir()
    for k in range(n // per):
        (tmp_path / "ds" / f"part-{k}.jsonl").write_text("".join(
            json.dumps({"id": i, "text": f"sample number {i:04d}"}) + "\n" for i in range(k * per, (k + 1) * per)))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "ds", "export_path": "out/o.jsonl", "executor": "ray", "np": 1, "batch_size": 8,
        "checkpoint_every": 1, "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")],
        "process": [{"hold_mapper": {"hold_file": str(tmp_path / "hold")}}, {"text_length_filter": {"min_len": 5}}]}))
    hold(tmp_path, 200)
    proc = djx("process", str(tmp_path / "r.yaml"), "--quiet", cwd=tmp_path, start_new_session=True)
    try:
        wait_for(lambda: manifest_records(tmp_path) >= per, proc, "a checkpoint past the first file")
        raylets = _descendants_named(proc.pid, "raylet")
        assert len(raylets) == 1
        workers = [p for p in raylets[0].children(recursive=True) if p.name().startswith("ray::")]
        raylets[0].kill()
        psutil.wait_procs(workers, timeout=GUARD_S)  # they end with their raylet (the run may end first)
        release(tmp_path)
        out, err = proc.communicate(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = [line for line in err.splitlines() if line.startswith("djx: error:")]
    assert proc.returncode != 0 and len(errors) == 1, err
    assert "raylet" in errors[0] and "run the same command again to resume" in errors[0]
    assert "Traceback" not in err
    received = int(re.search(r"the (\d+) samples received", errors[0]).group(1))
    assert manifest_records(tmp_path) == received >= per  # every batch received is saved

    again = djx("process", str(tmp_path / "r.yaml"), "--quiet", cwd=tmp_path)
    out, err = again.communicate(timeout=GUARD_S)
    assert again.returncode == 0, err
    assert f"resuming: {received} samples already done" in out + err
    assert [s["id"] for s in read_jsonl_file(tmp_path / "out" / "o.jsonl")] == list(range(n))
