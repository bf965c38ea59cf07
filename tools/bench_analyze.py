"""Time and peak memory of `djx analyze` on a run's outputs of growing size.

    python tools/bench_analyze.py [--sizes 100000 1000000] [--dir /tmp/djx-bench-analyze]

The outputs are written directly (tools/make_analysis_outputs.py: three filters, skewed and
list-valued stats, 0.5% rejected), then `djx analyze --recipe` runs as its own process while a
thread samples its USS (memory only it holds) every 0.1 s; the kernel's peak RSS is printed too.
Bounded memory shows as a peak that does not grow with the output; the table gives the ratios.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time

import psutil

from djx.tools.make_analysis_outputs import recipe_text, write_outputs


def _peak_rss(pid: int) -> int:
    """VmHWM of a live process (bytes)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: list[str]) -> dict:
    """Run cmd; its wall and CPU seconds (CPU time does not depend on what else the machine runs),
    peak USS (sampled) and peak RSS (kernel, read while it lives)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    peaks = {"uss": 0, "rss": 0}
    ps = psutil.Process(proc.pid)

    def sample():
        while proc.poll() is None:
            try:
                peaks["uss"] = max(peaks["uss"], ps.memory_full_info().uss)
                peaks["rss"] = max(peaks["rss"], _peak_rss(proc.pid))
            except psutil.Error:
                break
            time.sleep(0.1)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    err = proc.communicate()[1]
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode(errors='replace')}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": time.perf_counter() - t0, "cpu": cpu, **peaks}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dir", default="/tmp/djx-bench-analyze")
    args = ap.parse_args(argv)
    rows = []
    for n in args.sizes:
        export = os.path.join(args.dir, f"run{n}", "run.jsonl")
        if not os.path.exists(export.replace(".jsonl", ".summary.json")):
            t = time.perf_counter()
            write_outputs(export, n)
            print(f"wrote the outputs of {n} samples in {time.perf_counter() - t:.0f} s", flush=True)
        recipe = export.replace(".jsonl", ".yaml")
        with open(recipe, "w") as f:
            f.write(recipe_text(export))
        size = sum(os.path.getsize(export.replace(".jsonl", s)) for s in (".jsonl", ".dropped.jsonl", ".rejected.jsonl"))
        m = measure([sys.executable, "-m", "djx.cli", "analyze", export, "--recipe", recipe])
        rows.append({"samples": n, "bytes": size, **m})
        print(f"analyzed {n} samples: {m['seconds']:.1f} s ({m['cpu']:.1f} s CPU), peak USS "
              f"{m['uss'] / 2**20:.0f} MiB", flush=True)
    print(f"\n{'samples':>10} {'outputs MB':>11} {'wall s':>8} {'CPU s':>8} {'samples/CPU s':>14} "
          f"{'peak USS MiB':>13} {'peak RSS MiB':>13}")
    for r in rows:
        print(f"{r['samples']:>10} {r['bytes'] / 1e6:>11.0f} {r['seconds']:>8.1f} {r['cpu']:>8.1f} "
              f"{r['samples'] / r['cpu']:>14.0f} {r['uss'] / 2**20:>13.0f} {r['rss'] / 2**20:>13.0f}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(f"\n{b['samples'] // a['samples']}x the samples: {b['cpu'] / a['cpu']:.1f}x the CPU time, "
              f"{b['uss'] / a['uss']:.2f}x the peak USS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
