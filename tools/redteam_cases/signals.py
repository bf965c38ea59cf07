"""Signals as a scheduler or a terminal sends them: SIGTERM to djx process (once, twice), to djx
analyze, to a Ray driver and to its whole process group. Each must end with exit 143 and one djx
line, and a run must resume to every sample exactly once.

The runs are held by a plug-in at a known sample (a file says where), so every case acts on a
state (a checkpoint, a file the plug-in writes), never after a time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .common import Case, djx, last_line, write_jsonl

GUARD_S = 300  # only against a hang
TERMINATED = "djx: terminated (SIGTERM); the work done so far is saved: run the same command again to resume"

PLUGIN = '''
import os, time
from djx import Filter, Mapper, register_op

@register_op("rt_hold_mapper")
class RtHold(Mapper):
    """Holds batches with an id >= the number in hold_file while it exists."""
    def __init__(self, hold_file: str = "", **common):
        super().__init__(**common)
        self.hold_file = hold_file
    def process(self, batch):
        while True:
            try:
                limit = int(open(self.hold_file).read())
            except (OSError, ValueError):
                return
            if not any(s.get("id", 0) >= limit for s in batch.samples):
                return
            time.sleep(0.01)

@register_op("rt_driver_held_filter")
class RtDriverHeld(Filter):
    """keep() in the process whose pid driver_file holds: write held_file, wait, swallow everything."""
    stats_keys = ("rt_len",)
    def __init__(self, driver_file: str = "", held_file: str = "", **common):
        super().__init__(**common)
        self.driver_file, self.held_file = driver_file, held_file
    def compute_stats(self, batch):
        for s in batch.samples:
            batch.stats(s)["rt_len"] = len(s.get("text", ""))
    def keep(self, stats):
        while os.path.exists(self.driver_file) and open(self.driver_file).read().strip() == str(os.getpid()):
            open(self.held_file, "w").close()
            try:
                time.sleep(0.01)
            except BaseException:
                pass
        return True
'''


def _start(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "djx.cli", *args], cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait(condition, proc: subprocess.Popen, what: str) -> str | None:
    """None once `condition()` holds; else what went wrong (the run ended, or the guard passed)."""
    deadline = time.monotonic() + GUARD_S
    while not condition():
        if proc.poll() is not None:
            return f"the run ended (exit {proc.returncode}) before {what}: {last_line(proc.stderr.read())}"
        if time.monotonic() > deadline:
            proc.kill()
            return f"no {what} after {GUARD_S} s"
        time.sleep(0.02)
    return None


def _records(tmp: Path) -> int:
    try:
        return json.loads((tmp / "out/.o.djx-state/manifest.json").read_text())["read"]["records"]
    except (OSError, ValueError, KeyError):
        return -1


def _dataset(tmp: Path, files: int, per: int) -> None:
    (tmp / "ds").mkdir()
    for k in range(files):
        write_jsonl(tmp / "ds" / f"part-{k}.jsonl",
                    ({"id": i, "text": f"sample number {i:04d}"} for i in range(k * per, (k + 1) * per)))
    (tmp / "rt_ops.py").write_text(PLUGIN)


def _held_recipe(tmp: Path, **extra) -> None:
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "ds", "export_path": "out/o.jsonl", "np": 2, "batch_size": 8, "checkpoint_every": 2,
        "custom_ops": ["rt_ops.py"], "process": [{"rt_hold_mapper": {"hold_file": str(tmp / "hold")}},
                                                 {"text_length_filter": {"min_len": 5}}], **extra}))


def _each_once(tmp: Path, n: int) -> str | None:
    """None when the finished outputs hold each of the n samples exactly once."""
    seen = []
    for name, key in (("o.jsonl", None), ("o.dropped.jsonl", None), ("o.rejected.jsonl", "record")):
        path = tmp / "out" / name
        if path.exists():
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                seen.append((rec[key] if key else rec)["id"])
    return None if sorted(seen) == list(range(n)) else f"{len(seen)} samples out, {len(set(seen))} distinct, of {n}"


def _stopped_then_resumed(tmp: Path, proc: subprocess.Popen, n: int, rerun_args=()) -> tuple[bool, str]:
    """The signalled run ended with 143 and the line; the rerun completes with each sample once."""
    try:
        _, err = proc.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return False, f"still running {GUARD_S} s after SIGTERM"
    if proc.returncode != 143 or TERMINATED not in err.splitlines() or "Traceback" in err:
        return False, f"exit {proc.returncode}: {last_line(err)}"
    done = _records(tmp)
    (tmp / "hold").unlink(missing_ok=True)
    rerun = djx("process", "r.yaml", "--quiet", *rerun_args, cwd=tmp, timeout=GUARD_S)
    if rerun.returncode != 0:
        return False, f"the rerun failed (exit {rerun.returncode}): {last_line(rerun.stderr)}"
    missing = _each_once(tmp, n)
    return missing is None, missing or f"exit 143 with the line at {done} saved; the rerun resumed to each of {n} once"


def process_once(tmp: Path) -> tuple[bool, str]:
    _dataset(tmp, 1, 300)
    _held_recipe(tmp, start_method="fork")
    (tmp / "hold").write_text("100")
    proc = _start(tmp, "process", "r.yaml", "--quiet")
    why = _wait(lambda: _records(tmp) >= 16, proc, "a first checkpoint")
    if why:
        return False, why
    proc.send_signal(signal.SIGTERM)
    return _stopped_then_resumed(tmp, proc, 300)


def process_twice(tmp: Path) -> tuple[bool, str]:
    """The driver is held in a plug-in's keep() that swallows every exception: SIGTERM must still
    end it (the first asks, a later one stops at once)."""
    _dataset(tmp, 1, 100)
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "ds", "export_path": "out/o.jsonl", "np": 1, "start_method": "fork",
        "custom_ops": ["rt_ops.py"], "process": [{"rt_driver_held_filter": {
            "driver_file": str(tmp / "driver"), "held_file": str(tmp / "held")}}]}))
    proc = _start(tmp, "process", "r.yaml", "--quiet")
    (tmp / "driver").write_text(str(proc.pid))
    why = _wait((tmp / "held").exists, proc, "the driver held in keep()")
    if why:
        return False, why
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        return False, "SIGTERMs for 60 s did not end a driver held in code that catches everything"
    err = proc.stderr.read()
    ok = proc.returncode == 143 and "again while stopping: stopped at once" in err and "Traceback" not in err
    if not ok:
        return False, f"exit {proc.returncode}: {last_line(err)}"
    (tmp / "driver").unlink()
    rerun = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=GUARD_S)
    missing = _each_once(tmp, 100) if rerun.returncode == 0 else f"the rerun failed: {last_line(rerun.stderr)}"
    return missing is None, missing or "the second SIGTERM stopped it at once (143); the rerun finished the run"


def analyze_once(tmp: Path) -> tuple[bool, str]:
    stats = [f"s{k:03d}" for k in range(150)]
    write_jsonl(tmp / "o.jsonl", ({"id": i, "text": "t",
                                   "__dj__stats__": {s: (i * 7 + k) % 101 for k, s in enumerate(stats)}}
                                  for i in range(400)))
    proc = _start(tmp, "analyze", "o.jsonl", "--out", "a")
    why = _wait((tmp / "a" / "stats.csv").exists, proc, "stats.csv")
    if why:
        return False, why
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=GUARD_S)
    lines = err.strip().splitlines()
    ok = proc.returncode == 143 and len(lines) == 1 and lines[0].startswith("djx: terminated (SIGTERM)")
    return ok, f"exit {proc.returncode}, {len(lines)} line(s): {last_line(err)}"


def _ray_run(tmp: Path, to_group: bool) -> tuple[bool, str]:
    _dataset(tmp, 3, 100)
    _held_recipe(tmp, executor="ray", np=1)
    (tmp / "hold").write_text("200")  # a Ray block is a file: files 0 and 1 finish, file 2 is held
    proc = _start(tmp, "process", "r.yaml", "--quiet")
    why = _wait(lambda: _records(tmp) >= 100, proc, "a checkpoint past the first file")
    if why:
        return False, why
    if to_group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    return _stopped_then_resumed(tmp, proc, 300, ("--executor", "local"))


CASES = [
    Case("signals", "sigterm_process_once", process_once),
    Case("signals", "sigterm_process_twice_in_code_that_swallows", process_twice),
    Case("signals", "sigterm_analyze", analyze_once),
    Case("signals", "sigterm_ray_driver", lambda tmp: _ray_run(tmp, False), needs_ray=True),
    Case("signals", "sigterm_ray_process_group", lambda tmp: _ray_run(tmp, True), needs_ray=True),
]
