"""SIGTERM (a scheduler ending the job, `kill`, a terminal closing) stops `djx process` and
`djx analyze` cleanly: the signal only asks; the run stops between batches, saves its progress,
says so in one line and exits 143, and the same command resumes to every sample exactly once. A
second SIGTERM while stopping ends the process at once, as a kill does. On Ray, the same holds for
a SIGTERM to the driver alone and to the driver's whole process group.

Every test waits for a state (a checkpoint, a file a held op writes), never for a time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from helpers import (GUARD_S, N, PLUGINS_DIR, djx, hold, manifest_records, read_jsonl_file, release,
                     setup_held_run, wait_for)

TERMINATED = "djx: terminated (SIGTERM); the work done so far is saved: run the same command again to resume"


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    """The run's exit code and stderr, once it has ended (the guard only catches a hang)."""
    _, err = proc.communicate(timeout=GUARD_S)
    return proc.returncode, err


def assert_every_sample_once(run_dir, n: int = N) -> dict:
    """The finished run accounts for each input sample exactly once, by position and by id."""
    out = run_dir / "out"
    kept, dropped = read_jsonl_file(out / "o.jsonl"), read_jsonl_file(out / "o.dropped.jsonl")
    rejected = read_jsonl_file(out / "o.rejected.jsonl") if (out / "o.rejected.jsonl").exists() else []
    positions = [s["__dj__pos__"] for s in kept + dropped] + [r["pos"] for r in rejected]
    ids = [s["id"] for s in kept + dropped] + [r["record"]["id"] for r in rejected]
    assert sorted(positions) == list(range(n)) and sorted(ids) == list(range(n))
    summary = json.loads((out / "o.summary.json").read_text())
    assert summary["input"] == summary["kept"] + summary["dropped"] + summary["rejected"] == n
    assert summary["resumed"] and summary["check"]["ok"]
    return summary


# -- the local executor ---------------------------------------------------------------------------

@pytest.mark.slow
def test_sigterm_to_the_driver_stops_saves_and_the_rerun_counts_every_sample_once(tmp_path):
    recipe = setup_held_run(tmp_path)
    hold(tmp_path, 100)  # batches from sample 100 on wait in the workers: the run is mid-way when signalled
    proc = djx("process", str(recipe), "--quiet")
    wait_for(lambda: manifest_records(tmp_path) >= 16, proc, "a first checkpoint")
    proc.send_signal(signal.SIGTERM)  # the driver only, as `kill PID` does
    code, err = finish(proc)
    assert code == 143, err
    assert TERMINATED in err.splitlines() and "Traceback" not in err
    done = manifest_records(tmp_path)
    assert 16 <= done <= 100
    release(tmp_path)
    rerun = djx("process", str(recipe), "--quiet")
    out, err = rerun.communicate(timeout=GUARD_S)
    assert rerun.returncode == 0, err
    assert f"resuming: {done} samples already done" in out + err
    assert_every_sample_once(tmp_path)


def held_in_the_driver(tmp_path):
    """A run whose last op's keep() holds in the driver (when the outputs are checked at the end)
    and swallows every exception meanwhile; the run, started; the file saying it is held there."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"sample number {i:04d}"}) + "\n" for i in range(N)))
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({
        "dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 1, "batch_size": 8,
        "start_method": "fork", "custom_ops": [str(PLUGINS_DIR / "signal_ops.py")],
        "process": [{"driver_held_filter": {"hold_file": str(tmp_path / "hold"),
                                            "held_file": str(tmp_path / "held")}}]}))
    proc = djx("process", str(tmp_path / "recipe.yaml"), "--quiet")
    (tmp_path / "hold").write_text(str(proc.pid))
    return proc, tmp_path / "held"


@pytest.mark.slow
def test_a_sigterm_in_code_that_catches_everything_is_not_swallowed_and_a_second_ends_at_once(tmp_path):
    proc, held = held_in_the_driver(tmp_path)
    wait_for(held.exists, proc, "the driver held in the plug-in's keep()")
    # the first SIGTERM only asks (the plug-in's `except BaseException` never sees it), and the held
    # keep() never returns; a later one stops the process at once. Two sent back to back may reach
    # it as one (a pending signal is not queued twice): send until the process has ended
    deadline = time.monotonic() + GUARD_S
    while proc.poll() is None:
        assert time.monotonic() < deadline, "SIGTERMs did not end the run"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    code, err = finish(proc)
    assert code == 143, err
    assert "djx: SIGTERM again while stopping: stopped at once" in err and "Traceback" not in err
    # as after a kill: the rerun finishes the run
    (tmp_path / "hold").unlink()
    rerun = djx("process", str(tmp_path / "recipe.yaml"), "--quiet")
    _, err = rerun.communicate(timeout=GUARD_S)
    assert rerun.returncode == 0, err
    assert_every_sample_once(tmp_path)


# -- djx analyze ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_sigterm_during_analyze_ends_it_with_one_line(tmp_path):
    """An export whose records carry 150 stats: analyze draws 150 histograms after it has written
    stats.csv, which is when the test signals it."""
    stats = [f"s{k:03d}" for k in range(150)]
    (tmp_path / "o.jsonl").write_text("".join(
        json.dumps({"id": i, "text": "t", "__dj__stats__": {s: (i * 7 + k) % 101 for k, s in enumerate(stats)}})
        + "\n" for i in range(400)))
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "analyze", str(tmp_path / "o.jsonl"),
                             "--out", str(tmp_path / "a")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for((tmp_path / "a" / "stats.csv").exists, proc, "stats.csv")
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == 143, err
    assert err.strip().splitlines() == [
        "djx: terminated (SIGTERM); the analysis is not finished: run the same command again to write it"]
    assert not (tmp_path / "a" / "report.html").exists()


# -- the Ray executor: a driver with a local Ray of its own --------------------------------------

def held_ray_run(tmp_path) -> subprocess.Popen:
    """`djx process` on Ray (a local Ray the driver starts) over three files of 100 samples, held
    from sample 200 on, started in a session of its own (as a scheduler's job is); it has a
    checkpoint past the first file when this returns. Ray hands a block's rows on when its task
    ends (a block is one file here): files 0 and 1 can finish, file 2 is held."""
    (tmp_path / "ds").mkdir()
    for k in range(3):
        (tmp_path / "ds" / f"part-{k}.jsonl").write_text(
            "".join(json.dumps({"id": i, "text": f"sample number {i:04d}"}) + "\n"
                    for i in range(k * 100, k * 100 + 100)))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "ds", "export_path": "out/o.jsonl", "executor": "ray", "np": 1, "batch_size": 8,
        "checkpoint_every": 2, "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")],
        "process": [{"hold_mapper": {"hold_file": str(tmp_path / "hold")}}, {"text_length_filter": {"min_len": 5}}]}))
    hold(tmp_path, 200)
    proc = djx("process", str(tmp_path / "r.yaml"), "--quiet", start_new_session=True)
    wait_for(lambda: manifest_records(tmp_path) >= 100, proc, "a checkpoint past the first file")
    return proc


def assert_stopped_and_resumed(tmp_path, proc) -> None:
    code, err = finish(proc)
    assert code == 143, err[-3000:]
    assert TERMINATED in err.splitlines() and "Traceback" not in err
    done = manifest_records(tmp_path)
    assert 100 <= done < 300
    release(tmp_path)
    rerun = djx("process", str(tmp_path / "r.yaml"), "--quiet", "--executor", "local")  # no second Ray start
    out, err = rerun.communicate(timeout=GUARD_S)
    assert rerun.returncode == 0, err
    assert f"resuming: {done} samples already done" in out + err
    assert_every_sample_once(tmp_path, 300)


@pytest.mark.ray
@pytest.mark.slow
def test_sigterm_to_a_ray_driver_stops_it_saves_and_the_rerun_resumes(tmp_path):
    pytest.importorskip("ray")
    proc = held_ray_run(tmp_path)
    proc.send_signal(signal.SIGTERM)  # ray.init put its own handler in place (exit 15, nothing said)
    assert_stopped_and_resumed(tmp_path, proc)


@pytest.mark.ray
@pytest.mark.slow
def test_sigterm_to_a_ray_driver_s_process_group_stops_it_saves_and_the_rerun_resumes(tmp_path):
    pytest.importorskip("ray")
    proc = held_ray_run(tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)  # the local Ray's processes are in this group too
    assert_stopped_and_resumed(tmp_path, proc)
    assert not [p for p in _group(proc.pid)], "Ray processes outlived the run"


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_run_that_started_its_own_cluster_leaves_none_of_its_processes_behind(tmp_path):
    """The driver stops the local Ray it started with the run (its processes block SIGTERM, so it
    kills them once it has disconnected): the raylet's agents and workers go too. Its dedup phase
    ran in the driver (a local Ray is this machine: no shuffle, no second start)."""
    pytest.importorskip("ray")
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": f"sample number {i % 10}"}) + "\n" for i in range(20)))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "executor": "ray", "np": 1,
        "process": [{"text_length_filter": {"min_len": 5}}, {"document_deduplicator": {}}]}))
    proc = djx("process", str(tmp_path / "r.yaml"), "--quiet", start_new_session=True)
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 0, err
    assert [s["text"] for s in read_jsonl_file(tmp_path / "out" / "o.jsonl")] == [f"sample number {i}" for i in range(10)]
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["dropped"] == 10 and summary["check"]["ok"]
    assert "dedup_blocks_to_ray" not in summary.get("events", {})
    left = [_cmdline(p) for p in _group(proc.pid)]
    assert not left, f"Ray processes outlived the run: {left}"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return f"{pid} (gone)"


def _group(pgid: int) -> list[int]:
    """Processes still alive in the process group `pgid` (a zombie has ended: its parent has not
    reaped it yet)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.getpgid(int(entry)) == pgid:
                with open(f"/proc/{entry}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(entry))
        except OSError:
            pass
    return pids


def test_a_stop_during_the_report_of_a_finished_run_says_what_is_written_and_what_is_not(tmp_path):
    """report: true analyzes the finished run; a stop asked for then ends the report, and the
    message says the outputs are complete and how to write the report."""
    from djx import Pipeline
    from djx.core.recipe.recipe import recipe_from_dict
    from djx.core.run.stop import Stop, Stopped
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": "w " * (i % 9)}) + "\n" for i in range(60)))
    recipe = recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "report": True,
                               "process": [{"text_length_filter": {"min_len": 5}}]}, str(tmp_path))
    stop = Stop()

    def log(text):  # the stats table is printed once the outputs were read, before any picture
        if str(text).startswith("stat "):
            stop.request()
    with pytest.raises(Stopped, match=r"the run finished and its outputs are written, but not its report: "
                                      r"`djx analyze .*o\.jsonl` writes it"):
        Pipeline(recipe=recipe).run(progress=False, log=log, stop=stop)
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["partial"] is False and summary["input"] == 60 and summary["check"]["ok"]
    assert not (tmp_path / "out" / "o.analysis" / "report.html").exists()
