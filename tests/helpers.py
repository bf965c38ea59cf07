"""Plain functions the test modules share (fixtures are in conftest.py): the tests' paths and JSON
Lines files, two runs' outputs compared sample by sample (the Ray and the local executor), and a
`djx process` held at a known sample, killed there and resumed.

Held runs stop at known points by state, never by time: the recipe's hold_mapper holds every batch
from a given sample id on until the test releases it, so a run cannot finish (or pass the point)
before the test acts, however busy the machine.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
PLUGINS_DIR = TESTS_DIR / "plugins"
PLUGIN_SITE = PLUGINS_DIR / "site"  # holds the importable plug-in module djx_test_plugin_ops

LONG = "a sample text that is long enough"
POSITION_KEY = "__dj__pos__"  # as djx writes it (djx.POSITION_KEY), without importing djx here


def write_jsonl_file(path: Path, records) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read_jsonl_file(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# -- two runs of one recipe, compared -------------------------------------------------------------

KINDS = {"kept": "kept.jsonl", "dropped": "kept.dropped.jsonl", "rejected": "kept.rejected.jsonl"}


def outputs_by_position(folder: Path) -> dict:
    """{kind: {position: record}} of the outputs of an export named kept.jsonl in `folder`; kept
    records whose djx keys are in the stats file beside (a training-ready export) get them back."""
    out = {kind: [r for r in read_jsonl_file(Path(folder) / f)] for kind, f in KINDS.items()}
    beside = Path(folder) / "kept_stats.jsonl"
    if beside.exists():
        rows = read_jsonl_file(beside)
        assert len(rows) == len(out["kept"])
        out["kept"] = [{**r, **{k: v for k, v in row.items() if k != "__djx__record__"}}
                       for r, row in zip(out["kept"], rows)]
    return {kind: {r[POSITION_KEY]: r for r in records} for kind, records in out.items()}


def assert_close(a, b, where: str = "") -> None:
    """Equal, except floats within 1e-6 (a model's output may differ in the last bits by batch)."""
    if isinstance(a, float) or isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-6), where
    elif isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), where
        for k in a:
            if k == "sig" and where.endswith("__djx__stats_provenance__"):
                continue  # a signature over the stats: equal only when they are equal bit for bit
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def assert_same_run(both: dict) -> dict:
    """Ray wrote what local wrote, counted the same (times apart), and its own check passed; returns ray's summary.
    `both`: {"local": (summary, outputs_by_position), "ray": (summary, outputs_by_position)}."""
    (local, local_out), (ray_summary, ray_out) = both["local"], both["ray"]
    for kind in KINDS:
        assert sorted(ray_out[kind]) == sorted(local_out[kind]), kind
        for pos, record in local_out[kind].items():
            assert_close(ray_out[kind][pos], record, f"{kind}[{pos}]")
    for key in ("input", "kept", "dropped", "rejected", "blank_lines"):
        assert ray_summary[key] == local[key], key
    strip = lambda ops: [{k: v for k, v in op.items() if k not in ("seconds", "phases")} for op in ops]  # noqa: E731
    assert strip(ray_summary["ops"]) == strip(local["ops"])
    assert ray_summary["input"] == ray_summary["kept"] + ray_summary["dropped"] + ray_summary["rejected"]
    assert ray_summary["check"]["ok"] and ray_summary["executor"] == "ray"
    return ray_summary


# -- a run held at a known sample, killed, resumed ------------------------------------------------

N = 300          # samples in a held run's dataset
GUARD_S = 300    # only against a hang: a run that never gets where the test waits fails, never passes


def setup_held_run(tmp_path, pad=0, n=N, **extra) -> Path:
    """data.jsonl (n samples, texts padded by `pad` characters) and a recipe whose first op holds
    batches while the file `hold` in `tmp_path` says so (see hold)."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"sample number {i:04d}" + " x" * (pad // 2)}) + "\n"
                            for i in range(n)))
    recipe = {"dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 2, "batch_size": 8,
              "checkpoint_every": 2, "start_method": "fork",
              "custom_ops": [str(PLUGINS_DIR / "chaos_ops.py")],
              "process": [{"hold_mapper": {"hold_file": str(tmp_path / "hold")}},
                          {"text_length_filter": {"min_len": 5}},
                          {"slow_filter": {"seconds": 0}}], **extra}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def hold(tmp_path, from_id) -> None:
    """Runs of setup_held_run(tmp_path)'s recipe hold every batch with a sample id >= from_id until release."""
    (tmp_path / "hold.tmp").write_text(str(from_id))
    os.replace(tmp_path / "hold.tmp", tmp_path / "hold")


def release(tmp_path) -> None:
    (tmp_path / "hold").unlink(missing_ok=True)


def djx(*args, **kw) -> subprocess.Popen:
    """`djx ARGS...` started as a user's shell would, its stdout and stderr pipes of text."""
    return subprocess.Popen([sys.executable, "-m", "djx.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def manifest_records(tmp_path) -> int:
    """Samples the held run's last checkpoint covers; -1 before its first checkpoint."""
    try:
        return json.loads((tmp_path / "out/.o.djx-state/manifest.json").read_text())["read"]["records"]
    except (OSError, ValueError, KeyError):
        return -1


def wait_for(condition, proc, what) -> None:
    """Poll until `condition()` holds; the run must still be going (it is held, so it cannot end)."""
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"no {what} after {GUARD_S} s"
        time.sleep(0.01)


def kill_when(tmp_path, proc, min_records) -> None:
    """SIGKILL the run (and its workers) once its checkpoint shows at least `min_records`, then
    release the hold (start the run with hold(tmp_path, min_records + 16) or later: that lets two
    more batches of 8 finish, enough to reach a checkpoint every 2 batches)."""
    wait_for(lambda: manifest_records(tmp_path) >= min_records, proc, f"a checkpoint at {min_records}")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    release(tmp_path)


def held_run_outputs(tmp_path) -> tuple[list, list]:
    """(kept, dropped) records of the held run in `tmp_path`."""
    return read_jsonl_file(tmp_path / "out/o.jsonl"), read_jsonl_file(tmp_path / "out/o.dropped.jsonl")


NOBODY = 65534  # the user the trust tests play another user as (root can setuid)


def as_other_user(fn) -> int:
    """Run fn() in a child process as nobody; its exit status (0: fn did what it tried)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            fn()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitpid(pid, 0)[1]
