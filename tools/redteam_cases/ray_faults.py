"""Ray under faults: samples that kill their actor spread over the batches of several blocks, and
the raylet under the run killed mid-run. djx holds when each poison sample costs at most two actor
deaths and the run finishes with every other sample accounted for, and when a lost node is one error
line, every received batch saved, and the rerun resumes to each sample once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .common import Case, djx, last_line, one_clear_line, write_jsonl

PLUGIN = '''
import os, signal, time
from djx import Filter, Mapper, register_op


@register_op("rt_poison_filter")
class RtPoisonFilter(Filter):
    """SIGKILLs its own process on a sample with `poison`, leaving a file in `deaths` first."""
    stats_keys = ("rt_checked",)

    def __init__(self, deaths: str = "", **common):
        super().__init__(**common)
        self.deaths = deaths

    def compute_stats(self, batch):
        for sample in batch.samples:
            if sample.get("poison"):
                open(os.path.join(self.deaths, f"{os.getpid()}-{time.time_ns()}"), "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            batch.stats(sample)["rt_checked"] = 1

    def keep(self, stats):
        return True


@register_op("rt_hold_mapper")
class RtHoldMapper(Mapper):
    """Holds a batch with an id >= the number in `hold` while that file exists."""

    def __init__(self, hold: str = "", **common):
        super().__init__(**common)
        self.hold = hold

    def process(self, batch):
        while os.path.exists(self.hold) and any(s["id"] >= int(open(self.hold).read()) for s in batch.samples):
            time.sleep(0.01)
'''


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def poison_over_blocks(tmp: Path) -> tuple[bool, str]:
    n, poison = 400, {10, 40, 75, 230, 231, 350}
    (tmp / "ops.py").write_text(PLUGIN)
    (tmp / "deaths").mkdir()
    write_jsonl(tmp / "d.jsonl", [{"id": i, "text": "a text long enough", "poison": i in poison} for i in range(n)])
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "executor": "ray", "np": 1, "batch_size": 16,
        "custom_ops": [str(tmp / "ops.py")], "process": [{"rt_poison_filter": {"deaths": str(tmp / "deaths")}}]}))
    t0 = time.monotonic()
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=900)
    took, deaths = time.monotonic() - t0, len(os.listdir(tmp / "deaths"))
    if proc.returncode != 0:
        return False, f"exit {proc.returncode} after {took:.0f} s, {deaths} deaths: {last_line(proc.stderr)[:90]}"
    summary = json.loads((tmp / "out" / "o.summary.json").read_text())
    rejected = {r["record"]["id"]: r for r in _read(tmp / "out" / "o.rejected.jsonl")}
    kept = [r["id"] for r in _read(tmp / "out" / "o.jsonl")]
    held = (set(rejected) == poison and kept == [i for i in range(n) if i not in poison]
            and all(r["code"] == "worker_died" and r["op"] == "rt_poison_filter" for r in rejected.values())
            and deaths <= 2 * len(poison) and summary["worker_restarts"] == deaths)
    return held, (f"exit 0 in {took:.0f} s; {len(poison)} poison: {deaths} actor deaths (summary says "
                  f"{summary['worker_restarts']}), {len(rejected)} rejected, {len(kept)} kept")


def _raylet_of(pid: int):
    import psutil
    for p in psutil.Process(pid).children(recursive=True):
        try:
            if p.name() == "raylet":
                return p
        except psutil.NoSuchProcess:
            pass
    return None


def _records(tmp: Path) -> int:
    try:
        return json.loads((tmp / "out" / ".o.djx-state" / "manifest.json").read_text())["read"]["records"]
    except (OSError, ValueError, KeyError):
        return -1


def raylet_killed(tmp: Path) -> tuple[bool, str]:
    (tmp / "ops.py").write_text(PLUGIN)
    (tmp / "ds").mkdir()
    for k in range(3):  # a file is a block: file 0 finishes, file 2 is held
        write_jsonl(tmp / "ds" / f"part-{k}.jsonl",
                    [{"id": i, "text": f"sample {i:04d}"} for i in range(k * 100, k * 100 + 100)])
    (tmp / "hold").write_text("200")
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "ds", "export_path": "out/o.jsonl", "executor": "ray", "np": 1, "batch_size": 8,
        "checkpoint_every": 1, "custom_ops": [str(tmp / "ops.py")],
        "process": [{"rt_hold_mapper": {"hold": str(tmp / "hold")}}, {"text_length_filter": {"min_len": 3}}]}))
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", "r.yaml", "--quiet"], cwd=tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while _records(tmp) < 100:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False, f"no checkpoint past file 0 (exit {proc.poll()})"
            time.sleep(0.05)
        raylet = _raylet_of(proc.pid)
        if raylet is None:
            return False, "no raylet under the djx process"
        raylet.kill()
        (tmp / "hold").unlink()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = [line for line in err.splitlines() if line.startswith("djx: error:")]
    saved = _records(tmp)
    again = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=600)
    ids = [r["id"] for r in _read(tmp / "out" / "o.jsonl")]
    held = (one_clear_line(subprocess.CompletedProcess([], proc.returncode, "", err)) and len(errors) == 1
            and f"the {saved} samples received" in errors[0] and again.returncode == 0 and ids == list(range(300)))
    return held, (f"exit {proc.returncode}, {len(errors)} djx error line(s), {saved} saved; rerun exit "
                  f"{again.returncode}, {len(ids)} kept ({len(set(ids))} distinct)")


CASES = [Case("ray", "ray_poison_samples_over_blocks", poison_over_blocks, needs_ray=True),
         Case("ray", "ray_raylet_killed_mid_run", raylet_killed, needs_ray=True)]
