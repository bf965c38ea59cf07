"""Progress, trial estimates and the terminal of a Ray run: the count shown is the samples written,
the rate counts from the first result over the samples measured since, the estimate of a trial
comes from its own steady rate, and Ray's own log lines go to a file, not to the terminal."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml

from conftest import PLUGINS_DIR
from helpers import GUARD_S, N, hold, release, setup_held_run

pytestmark = pytest.mark.ray

LINE = re.compile(r"\[djx\] ([\d,]+) / ([\d,]+) samples \([\d.]+%\), [\d,]+ kept this session"
                  r"(?:, ([\d.]+) samples/s)?(?:, ETA (.+))?$")
RAY_NOISE = re.compile(r"core_worker\.cc|\(raylet\)|INFO worker\.py|Running Dataset|\(pid=|"
                       r"raylet\.cc|\bINFO\b.*\.py:\d+|Dataset \w+ execution|\d+/\d+ \[")


class Lines:
    """A run's stderr, line by line, each with when this test received it."""

    def __init__(self, proc: subprocess.Popen):
        self.got: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.got.append((time.monotonic(), line.rstrip("\n")))

    def progress(self) -> list[tuple[float, int, float | None, str | None]]:
        """(received at, samples shown, rate shown, ETA shown) of each progress line so far."""
        out = []
        for t, line in list(self.got):
            m = LINE.search(line)
            if m:
                out.append((t, int(m[1].replace(",", "")), float(m[3]) if m[3] else None, m[4]))
        return out


def djx_run(*args, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "djx.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def written(tmp_path) -> int:
    """Samples the ledger has written so far (its parts in the state folder)."""
    state = tmp_path / "out/.o.djx-state"
    return sum(len((state / f"{kind}.jsonl.part").read_bytes().splitlines())
               for kind in ("kept", "dropped", "rejected") if (state / f"{kind}.jsonl.part").exists())


def test_ray_progress_shows_the_samples_written_and_a_rate_from_the_first_result(ray_address, tmp_path):
    """The run holds every batch from sample 76 on: batches before it stream to the ledger (the
    display reaches the 72 samples written), never past them; after the release the rate shown is
    at most the samples over the time the test itself saw the run held, and the last one is the
    summary's (it said 9.2/s where the summary said 90.1/s)."""
    recipe = setup_held_run(tmp_path, executor="ray", ray_address=ray_address, checkpoint_every=1)  # each batch on disk
    hold(tmp_path, 76)
    proc = djx_run("process", str(recipe), DJX_PROGRESS_EVERY_S="0")
    lines = Lines(proc)
    deadline = time.monotonic() + GUARD_S
    try:
        while not any(n == 72 for _, n, _, _ in lines.progress()):
            assert proc.poll() is None, "\n".join(line for _, line in lines.got)
            assert time.monotonic() < deadline, f"no progress line at 72 samples: {lines.got}"
            time.sleep(0.01)
        held_seen = time.monotonic()
        shown = lines.progress()
        assert [n for _, n, _, _ in shown] == sorted(n for _, n, _, _ in shown)
        assert all(n <= 72 for _, n, _, _ in shown)    # nothing of the held batch or later
        assert written(tmp_path) == 72                  # and what is shown is written (and durable)
    finally:
        release(tmp_path)
    released = time.monotonic()
    assert proc.wait(timeout=GUARD_S) == 0
    lines.thread.join()
    after = [p for p in lines.progress() if p[0] > released]
    assert after and after[-1][1] == N
    for _, n, rate, eta in after:
        assert n <= N
        if rate is not None:
            # the run's first result came before the test saw the hold, each of these lines after the
            # release: its rate is at most its samples over that time
            assert rate <= n / (released - held_seen)
    summary = json.loads((tmp_path / "out/o.summary.json").read_text())
    t = summary["timing"]
    assert t["startup_seconds"] > 0 and t["steady_samples_per_second"] <= N / (released - held_seen)
    # the last progress line and the summary give one rate: both from when the first actor was ready
    last = [rate for _, n, rate, _ in after if rate is not None and n == N]
    assert last and abs(last[-1] - t["steady_samples_per_second"]) <= 0.1 * t["steady_samples_per_second"] + 0.1, \
        (last, t)
    text = "\n".join(line for _, line in lines.got)
    assert re.search(r"start-up took [\d.]+ s; processing", text)


def slow_recipe(tmp_path, name: str, n: int, **extra):
    """n samples; a filter that takes `seconds` per sample, so that processing, not start-up or
    Ray's per-batch overhead, makes the time of the whole dataset."""
    data = tmp_path / "data.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": i, "text": f"sample number {i:05d}"}) + "\n" for i in range(n)))
    recipe = {"dataset_path": str(data), "export_path": f"{name}/o.jsonl", "np": 2, "batch_size": 8,
              "start_method": "fork", "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")],
              "process": [{"slow_filter": {"seconds": 0.02}}], **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_a_trial_on_ray_estimates_the_whole_run_from_its_steady_rate_as_the_local_engine_does(
        ray_address, tmp_path):
    """The same --limit trial on each engine: each estimates the whole dataset at no less than its
    sleeps alone take (n x 0.02 s over 2 workers: load only slows a run), from a steady rate taken
    over every sample (a rate over the results Ray hands back in a burst would make the whole
    dataset take no time). Not compared with each other: two runs' rates move with the machine's load."""
    n = 20_000
    floor = n * 0.02 / 2
    est = {}
    for executor in ("local", "ray"):
        recipe = slow_recipe(tmp_path, executor, n, executor=executor, ray_address=ray_address)
        proc = djx_run("process", str(recipe), "--limit", "64", "--quiet")
        out, err = proc.communicate(timeout=GUARD_S)
        assert proc.returncode == 0, err
        summary = json.loads((tmp_path / executor / "o.summary.json").read_text())
        assert summary["partial"] and summary["input"] == 64 and summary["estimate"]["samples"] == n
        est[executor] = summary["estimate"]["seconds"]
        # the rate is over the samples measured after the start of processing: on both engines every
        # sample (Ray's stage actors say when they began their batches: none is left untimed)
        t = summary["timing"]
        assert 64 / t["processing_seconds"] * 0.99 <= t["steady_samples_per_second"] <= 64 / t["processing_seconds"] * 1.01
        assert est[executor] >= floor * 0.9, (executor, est[executor], floor)  # 0.9: where the clocks start


def test_ray_log_lines_go_to_a_file_and_a_failing_op_is_said_by_djx(ray_address, tmp_path):
    """A Ray run's terminal holds djx's lines only; Ray's go to <export stem>.ray.log. A sample
    that fails under on_error: fail still reaches the user as djx's message."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"sample number {i}", **({"boom": 1} if i == 30 else {})})
                            + "\n" for i in range(60)))
    common = {"dataset_path": str(data), "np": 2, "batch_size": 8, "executor": "ray", "ray_address": ray_address,
              "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")]}
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump({**common, "export_path": "ok/o.jsonl",
                                  "process": [{"text_length_filter": {"min_len": 5}}]}))
    proc = djx_run("process", str(ok), DJX_PROGRESS_EVERY_S="0")
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 0, err
    assert "[djx] 60 / 60 samples" in err
    assert not [line for line in (out + err).splitlines() if RAY_NOISE.search(line)], out + err
    assert (tmp_path / "ok/o.ray.log").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**common, "export_path": "bad/o.jsonl", "on_error": "fail",
                                   "process": [{"poison_filter": {}}]}))
    proc = djx_run("process", str(bad))
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 1
    assert "poison_filter" in err and "Traceback" not in err, err
    assert not [line for line in (out + err).splitlines() if RAY_NOISE.search(line)], out + err
    assert (tmp_path / "bad/o.ray.log").exists()
