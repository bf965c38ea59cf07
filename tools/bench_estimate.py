"""How far a trial run's estimate (`djx process RECIPE --limit 200`) is from the real full run.

    python tools/bench.py estimate [--sizes 1000 10000] [--limit 200]

For each size: the demo's 100 samples (tiny CLIP + tiny BLIP, configs/demo.yaml) repeated and
shuffled (seeded) to that size, then a trial run with --limit and a full run, each a fresh
`djx process` (new workers, models loaded again). Prints the estimate next to the full run's
figures: seconds (the summary's, from the start of the run to its output check, as the estimate
counts them; plus the command's wall time) and keep rate, with the error of each.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "tests" / "assets" / "demo"


def write_demo_scaled(folder: Path, n: int, seed: int = 0) -> Path:
    """n samples: the demo's records repeated (image paths made absolute) in a seeded random order."""
    records = [json.loads(line) for line in open(DEMO / "demo.jsonl") if line.strip()]
    for r in records:
        r["images"] = [str(DEMO / p) for p in r["images"]]
    rows = [dict(records[i % len(records)], id=f"{records[i % len(records)]['id']}-{i}") for i in range(n)]
    random.Random(seed).shuffle(rows)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"demo_{n}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_djx(data: Path, out: Path, *extra: str) -> tuple[dict, float]:
    """A fresh `djx process` of the demo recipe on `data`: its summary and its wall time."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(REPO / "configs/demo.yaml"), "--quiet",
                           "--set", f"dataset_path={data}", "--export-path", str(out), *extra],
                          capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"djx process failed:\n{proc.stderr}")
    return json.loads(out.with_name(out.stem + ".summary.json").read_text()), wall


def bench_estimate(work: Path, sizes=(1_000, 10_000), limit: int = 200) -> list[tuple]:
    rows = []
    for n in sizes:
        data = write_demo_scaled(work / f"est_{n}", n)
        trial, trial_wall = run_djx(data, work / f"est_{n}/trial/o.jsonl", "--limit", str(limit))
        full, full_wall = run_djx(data, work / f"est_{n}/full/o.jsonl")
        e = trial["estimate"]
        keep = full["kept"] / full["input"]
        rows.append((f"--limit {limit} of {n:,} (trial {trial_wall:.0f} s wall)",
                     f"estimate {e['seconds']:.0f} s, {e['keep_rate']:.1%} kept, {e['samples']:,} samples",
                     f"full run {full['seconds']:.0f} s ({full_wall:.0f} s wall), {keep:.1%} kept",
                     f"time {e['seconds'] / full['seconds'] - 1:+.0%}, keep rate {e['keep_rate'] - keep:+.1%} "
                     f"points"))
        rows.append((f"  trial's seconds, {n:,}", e["seconds_how"], "", ""))
    return rows
