"""The serial parts of `scoring: device` when the device decodes (tools/bench_throughput.py --only device).

With `image_decode: device` a preparing worker only reads the JPEG files and tokenizes; the
workers scale with the cores, but the main process (read, dispatch, write) and the device's scorer
(receive, join, answer) are one process each: their CPU time per sample sets a ceiling no number of
cores lifts. Measured with the simulated device at zero cost preparing as `image_decode: device`
does (`jpeg_files: true`, any machine), over two dataset sizes: each process's CPU seconds (polled
until it exits) at the larger size minus those at the smaller, per extra sample, so start-up
cancels. The H100 goal is >= 6,000 samples/s with GPU decode: each serial part must allow more.

    python -m djx.tools.serial_ceiling [--work DIR]     # alone; bench_throughput --only device runs it too
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

SIZES = (2400, 12000)


def process_cpu(recipe: Path) -> dict:
    """CPU seconds of the run's main process, its scorer and its workers (summed, with their
    forkserver), polled until the run ends. The scorer is the process that names itself djx-weights
    (the weight owner, where scoring: device scores); the resource tracker is left out."""
    import psutil
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root, seen = psutil.Process(proc.pid), {}
    while proc.poll() is None:
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                with p.oneshot():
                    kind = "main" if p.pid == root.pid else "scorer" if p.name() == "djx-weights" else \
                        None if "resource_tracker" in " ".join(p.cmdline()) else "workers"
                    seen[p.pid] = (kind, sum(p.cpu_times()[:2]))
            except psutil.Error:
                continue
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"djx run failed ({proc.returncode}): {proc.stderr.read()[-2000:]}")
    out = {"main": 0.0, "scorer": 0.0, "workers": 0.0}
    for kind, cpu in seen.values():
        if kind is not None:
            out[kind] += cpu
    if not any(kind == "scorer" for kind, _ in seen.values()):
        raise SystemExit("no process named djx-weights was seen: the run did not score on a device's scorer")
    return out


def measure(work: Path, photos: Path) -> dict:
    """Per extra sample, microseconds of CPU of the main process, the scorer and the workers."""
    from djx.tools.bench_throughput import TINY, named_again, write_recipe
    cpu = []
    for n in SIZES:
        data = named_again(photos, n, f"jpeg-files-{n}.jsonl")
        cpu.append(process_cpu(write_recipe(TINY / "tiny-clip", data, work / f"out-jpeg-files-{n}", devices=["cpu"],
                                            scoring="device", seconds_per_pair=0.0, jpeg_files=True)))
    extra = SIZES[1] - SIZES[0]
    return {k: 1e6 * (cpu[1][k] - cpu[0][k]) / extra for k in cpu[0]}


def report(us: dict, cores: int) -> str:
    ceiling = {k: 1e6 / max(us[k], 1e-3) for k in ("main", "scorer")}
    return (f"\n## serial parts with the device decoding (simulated device, JPEG files, {SIZES[1] - SIZES[0]:,} "
            f"extra samples)\nCPU per sample: main process {us['main']:.1f} us, scorer {us['scorer']:.1f} us, "
            f"workers {us['workers']:.1f} us (over {cores} cores); ceilings on one of this machine's cores: main "
            f"**{ceiling['main']:,.0f}**, scorer **{ceiling['scorer']:,.0f}** samples/s (the H100 goal with GPU "
            f"decode: >= 6,000)")


def main() -> None:
    """On its own (a lent GPU box's cores, say): 200 photo-like JPEGs named over the two sizes."""
    import argparse
    import os
    import shutil
    import tempfile

    from djx.tools.bench_throughput import write_photos
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="serial-ceiling-"))
    try:
        us = measure(work, write_photos(work / "photos", 200))
    finally:
        if args.work is None:  # a folder of its own: photos and outputs go with it
            shutil.rmtree(work, ignore_errors=True)
    print(report(us, len(os.sched_getaffinity(0))), flush=True)


if __name__ == "__main__":
    main()
