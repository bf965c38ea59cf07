"""A run's last step and its stuck workers: finishing is a crash-safe transaction (a rerun after a
stop at any instant of it completes or resumes to the same outputs), the lock is held to the end,
a worker stuck in one sample is killed and only that sample rejected, and no worker outlives a
killed run."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from djx import DjxError, Pipeline
from djx.core.io import outputs

from conftest import read_jsonl_file

PLUGINS = Path(__file__).parent / "plugins"


def write_data(path: Path, n: int, stuck=()) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": "x" * (i % 9), "stuck": i in stuck}) + "\n"
                            for i in range(n)))
    return path


def recipe(tmp_path, write_recipe, name="r.yaml", **keys):
    base = dict(dataset_path="d.jsonl", export_path="out/o.jsonl", np=1, batch_size=8,
                custom_ops=[str(PLUGINS / "stuck_ops.py")],
                process=[{"text_length_filter": {"min_len": 3}}, {"stuck_filter": {}}])
    return write_recipe(tmp_path / name, **{**base, **keys})


def outputs_of(folder: Path) -> dict:
    return {name: (folder / name).read_bytes() for name in ("o.jsonl", "o.dropped.jsonl", "o.rejected.jsonl")}


class Stop(BaseException):
    """Stands for the process dying at this instant (nothing after it runs)."""


@pytest.mark.slow
@pytest.mark.parametrize("call", ["replace", "remove"])
def test_a_run_stopped_at_any_instant_of_its_finish_completes_on_the_next_run(tmp_path, write_recipe,
                                                                               monkeypatch, call):
    write_data(tmp_path / "d.jsonl", 40)
    r = recipe(tmp_path, write_recipe, start_method="fork")
    Pipeline.from_recipe(str(r), {"export_path": str(tmp_path / "ref" / "o.jsonl")}).run(progress=False)
    reference = outputs_of(tmp_path / "ref")
    real = getattr(os, call)
    instant = 0
    while True:  # stop after the 1st, 2nd, ... call of the finish, until a finish runs through
        calls = []

        def dying(*args, **kw):
            if len(calls) == instant:
                raise Stop
            calls.append(args)
            return real(*args, **kw)

        monkeypatch.setattr(outputs.os, call, dying)
        try:
            Pipeline.from_recipe(str(r)).run(progress=False, log=lambda *a: None)
            finished = True
        except Stop:
            finished = False
        monkeypatch.setattr(outputs.os, call, real)
        if finished:
            break
        summary = Pipeline.from_recipe(str(r)).run(progress=False, log=lambda *a: None)  # the rerun
        assert outputs_of(tmp_path / "out") == reference, f"stopped at {call} #{instant}"
        assert summary["input"] == 40 and summary["check"]["ok"]
        assert not (tmp_path / "out" / ".o.djx-state").exists()
        for f in (tmp_path / "out").iterdir():
            f.unlink()
        instant += 1
    assert instant >= (6 if call == "replace" else 2)  # stopped at each move or removal of the finish


def test_the_lock_is_held_through_the_check_and_the_finish(tmp_path, write_recipe, monkeypatch):
    write_data(tmp_path / "d.jsonl", 20)
    r = recipe(tmp_path, write_recipe, start_method="fork")
    seen = []

    def second_run_meanwhile(*args, **kw):
        proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(r), "--quiet"],
                              capture_output=True, text=True)
        seen.append((proc.returncode, proc.stderr))
        return real_check(*args, **kw)

    from djx.core.run import ledger
    real_check = ledger.check_outputs
    monkeypatch.setattr(ledger, "check_outputs", second_run_meanwhile)
    Pipeline.from_recipe(str(r)).run(progress=False, log=lambda *a: None)
    assert seen and seen[0][0] == 1 and "another djx run is writing" in seen[0][1]
    assert len(read_jsonl_file(tmp_path / "out" / "o.jsonl")) > 0


@pytest.mark.slow
def test_a_sample_stuck_in_an_op_is_rejected_with_code_timeout_and_the_rest_is_kept(tmp_path, write_recipe):
    write_data(tmp_path / "d.jsonl", 30, stuck={13})
    r = recipe(tmp_path, write_recipe, sample_timeout=5)
    summary = Pipeline.from_recipe(str(r)).run(progress=False, log=lambda *a: None)
    rejected = read_jsonl_file(tmp_path / "out" / "o.rejected.jsonl")
    assert [(x["record"]["id"], x["code"], x["op"]) for x in rejected] == [(13, "timeout", "stuck_filter")]
    assert "sample_timeout" in rejected[0]["reason"]
    assert summary["input"] == 30 and summary["rejected"] == 1 and summary["check"]["ok"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] == "Z"  # a zombie has already died


def wait_for(condition, what: str, limit: float = 120):
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"never reached: {what}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", pytest.param("spawn", marks=pytest.mark.spawn)])
def test_a_worker_stuck_mid_sample_dies_with_a_killed_run_and_the_rerun_is_not_refused(tmp_path, write_recipe,
                                                                                        start_method):
    write_data(tmp_path / "d.jsonl", 40, stuck={21})
    marker = tmp_path / "stuck.pid"
    r = recipe(tmp_path, write_recipe, start_method=start_method, checkpoint_every=1,
               process=[{"text_length_filter": {"min_len": 3}}, {"stuck_filter": {"marker": str(marker)}}])
    run = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(r), "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(marker.exists, "a worker stuck in its sample")
    worker = int(marker.read_text())
    os.kill(run.pid, signal.SIGKILL)  # the main process only
    run.wait()
    wait_for(lambda: _gone(worker), "the stuck worker to die with its run", limit=30)
    rerun = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(r), "--quiet",
                            "--set", "sample_timeout=4"], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    rejected = read_jsonl_file(tmp_path / "out" / "o.rejected.jsonl")
    assert [(x["record"]["id"], x["code"]) for x in rejected] == [(21, "timeout")]


@pytest.mark.slow
def test_batches_are_bounded_in_bytes_as_well_as_records(tmp_path, write_recipe):
    from djx.core.executors.base import DatasetSource
    sizes = [3, 3, 3, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]  # MiB of text per line
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": "x" * (mib << 20)}) + "\n"
                                              for i, mib in enumerate(sizes)))
    batches = [[it.pos for it in b.items] for b in DatasetSource([str(tmp_path / "d.jsonl")], batch_size=8,
                                                                 max_batch_bytes=5 << 20)]
    assert batches == [[0, 1], [2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13], [14, 15]]
    r = recipe(tmp_path, write_recipe, batch_size=8, max_batch_bytes=5 << 20, start_method="fork",
               process=[{"text_length_filter": {"min_len": 1}}])
    summary = Pipeline.from_recipe(str(r)).run(progress=False, log=lambda *a: None)
    assert summary["input"] == summary["kept"] == len(sizes)


def _file_size_limit(limit: int):
    def apply():  # in the child: writes past `limit` bytes fail (EFBIG), as on a disk that fills up
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.slow
def test_a_write_that_fails_mid_run_says_the_data_is_saved_and_the_rerun_resumes(tmp_path, write_recipe):
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": "y" * (i % 300)}) + "\n"
                                              for i in range(600)))
    r = recipe(tmp_path, write_recipe, start_method="fork", checkpoint_every=2)
    cmd = [sys.executable, "-m", "djx.cli", "process", str(r), "--quiet"]
    failed = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_file_size_limit(30_000))
    assert failed.returncode == 1, failed.stderr
    assert "could not write the outputs" in failed.stderr and "run the same command again" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert not (tmp_path / "out" / "o.jsonl").exists()  # nothing that looks finished
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["resumed"] and summary["check"]["ok"]
    ids = [s["id"] for name in ("o.jsonl", "o.dropped.jsonl") for s in read_jsonl_file(tmp_path / "out" / name)]
    assert sorted(ids) == list(range(600))


@pytest.mark.slow
def test_sigterm_to_the_run_s_process_group_saves_progress_and_the_rerun_resumes(tmp_path, write_recipe):
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": "hello world"}) + "\n"
                                              for i in range(300)))
    r = recipe(tmp_path, write_recipe, start_method="fork", np=2, checkpoint_every=1,
               custom_ops=[str(PLUGINS / "chaos_ops.py")], process=[{"slow_filter": {"seconds": 0.02}}])
    cmd = [sys.executable, "-m", "djx.cli", "process", str(r), "--quiet"]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    manifest = tmp_path / "out" / ".o.djx-state" / "manifest.json"
    wait_for(manifest.exists, "a first checkpoint")
    os.killpg(run.pid, signal.SIGTERM)  # as a scheduler ending the job does: the workers get it too
    _, err = run.communicate()
    assert run.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "run the same command again" in err and "Traceback" not in err
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["resumed"] and summary["rejected"] == 0 and summary["worker_restarts"] == 0
    ids = [s["id"] for name in ("o.jsonl", "o.dropped.jsonl") for s in read_jsonl_file(tmp_path / "out" / name)]
    assert sorted(ids) == list(range(300))
