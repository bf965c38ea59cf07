"""Ray start-up against its floor, measured in one run (issue: start-up on Ray <= 2x `ray.init` +
model load).

    python tools/bench_ray_startup.py [--repeat 2]

Each figure in a fresh process, so nothing is warm in this one:
  ray.init   `ray.init()` of a new local cluster until it answers (then shut down);
  load       `import torch, transformers` and loading the demo's tiny CLIP and BLIP with their
             processors (what a stage actor's set-up costs at least);
  djx        `djx process configs/demo.yaml` with `executor: ray` (a local cluster it starts itself):
             the summary's `timing.startup_seconds` (until the first stage actor began its first
             batch), its parts (main process, Ray starting, the stage actor starting, its set-up,
             the first batch) and the command's wall time.
Prints each, and djx's start-up over 2 x ray.init + load (the target: <= 1).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from djx.core.run.breakdown import format_timing

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "assets" / "models"

RAY_INIT = """
import time, ray
t0 = time.perf_counter()
ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
ray.get(ray.remote(lambda: 1).remote())
print(time.perf_counter() - t0)
ray.shutdown()
"""

LOAD = f"""
import time
t0 = time.perf_counter()
import torch, transformers
for name in ("tiny-clip", "tiny-blip-itm"):
    transformers.AutoModel.from_pretrained({str(MODELS)!r} + "/" + name)
    transformers.AutoProcessor.from_pretrained({str(MODELS)!r} + "/" + name)
print(time.perf_counter() - t0)
"""


def timed_python(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"failed: {out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def djx_on_ray(work: Path) -> tuple[float, dict]:
    """(the command's wall seconds, the summary's timing) of the demo on a local Ray cluster."""
    recipe = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    base = REPO / "configs"
    recipe["dataset_path"] = str((base / recipe["dataset_path"]).resolve())
    for op in recipe["process"]:
        for params in op.values():
            for key in ("hf_clip", "hf_blip"):
                if key in params:
                    params[key] = str((base / params[key]).resolve())
    out = work / f"out-{time.monotonic_ns()}"
    recipe.update(export_path=str(out / "demo.jsonl"), executor="ray")
    path = work / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(path), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"djx failed: {proc.stderr[-2000:]}")
    summary = json.loads((out / "demo.summary.json").read_text())
    return wall, summary["timing"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    starts, floors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeat):
            init, load = timed_python(RAY_INIT), timed_python(LOAD)
            wall, timing = djx_on_ray(Path(tmp))
            start = timing["startup_seconds"]
            floor = 2 * init + load
            starts.append(start)
            floors.append(floor)
            print(f"run {k + 1}: ray.init {init:.1f} s, import + model load {load:.1f} s; djx on Ray: start-up "
                  f"{start:.1f} s (command {wall:.1f} s) = {start / floor:.2f} x (2 x ray.init + load = {floor:.1f} s)",
                  flush=True)
            print(f"  its {format_timing(timing)}", flush=True)
    if len(starts) > 1:  # ray.init alone varies by 1 s from run to run (docs/ray.md): a single ratio is noisy
        ratios = sorted(s / f for s, f in zip(starts, floors))
        print(f"{len(starts)} runs: djx start-up median {statistics.median(starts):.1f} s against a floor median "
              f"{statistics.median(floors):.1f} s = {statistics.median(starts) / statistics.median(floors):.2f} x; "
              f"per run {ratios[0]:.2f}-{ratios[-1]:.2f} x, {sum(r <= 1 for r in ratios)} of {len(ratios)} <= 1")


if __name__ == "__main__":
    main()
