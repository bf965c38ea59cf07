"""GPU check, scoring in one place per device (`scoring: device`): part of tools/gpu_check.py.

Full-size CLIP ViT-B/32 (random weights) over 2,000 samples of 640-px JPEGs with np unset, three
runs: `scoring: workers`, `scoring: device`, and `scoring: device` with its scorer killed once mid-run.
Checks: in the device runs only the scorers (the weight owners, one per GPU) hold GPU memory,
i.e. one CUDA context per device, and no worker loads the model; every sample is scored in each run,
the device runs within 1e-4 of the workers run (float32; forwards of other sizes change the last
digits), the killed run recovers with nothing rejected. Prints each run's steady samples/s and the
GPU's busy share (nvidia-smi, sampled).

With `cpu=True` (gpu_check.py --cpu) the same runs go on the CPU, to check this script itself:
the nvidia-smi parts are left out.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

N = 2000


def scoring(out: Path, cpu: bool = False) -> bool:
    from djx.tools.bench import save_full_size
    from djx.tools.bench_throughput import write_photos
    model = out / "models" / "clip"
    if not model.is_dir():
        save_full_size("clip", out / "models")
    n = 64 if cpu else N
    data = write_photos(out / "scoring-data", n)
    print(f"\nscoring: device: CLIP ViT-B/32 float32, np unset, {n} samples of 640-px JPEGs")
    runs = {name: _run(out, name, model, data, scoring, kill, cpu)
            for name, scoring, kill in (("workers", "workers", False), ("device", "device", False),
                                        ("killed", "device", True))}
    ref = runs["workers"]["scores"]
    ok = True
    for name, r in runs.items():
        s = r["summary"]
        diff = max((abs(x - y) for i in ref for x, y in zip(ref[i], r["scores"].get(i, [float("nan")]))),
                   default=float("nan"))
        complete = set(r["scores"]) == set(range(n)) and s["rejected"] == 0 and s["check"]["ok"]
        loads = [label for loads in s["model_loads"].values() for label in loads]
        line = (f"  {name:<8} {s['timing']['steady_samples_per_second']:,.1f} samples/s (start-up "
                f"{s['timing']['startup_seconds']:.1f} s), all scored: {complete}, max |this - workers| {diff:.2e}")
        if not cpu:
            from djx.tools.gpu_check import _name as process_name
            holders = {pid: process_name(pid) or "gone" for pid in sorted(r["holders"])}
            line += (f", GPU busy {r['busy']:.0f}%, processes holding GPU memory {holders} "
                     f"(scorers: {sorted(r['owners'])}; this check's own process: {os.getpid()})")
        print(line)
        ok = ok and complete and diff <= 1e-4
        if name != "workers":
            gpus = {d for d in s["plan"]["devices"] if d.startswith("cuda")}
            one_context = cpu or (len(r["owners"]) == len(gpus) and r["holders"] == r["owners"])
            ok = ok and one_context and not any("clip" in label for label in loads)
    ok = ok and runs["killed"]["killed"]
    print(f"  the killed run's scorer was killed once and the run recovered: {runs['killed']['killed']}")
    print(f"scoring: device: {'passed' if ok else 'FAILED'}")
    return ok


def _run(out: Path, name: str, model: Path, data: Path, scoring: str, kill: bool, cpu: bool) -> dict:
    from djx import Pipeline
    from djx.core.recipe.recipe import recipe_from_dict
    recipe = {"dataset_path": str(data), "export_path": str(out / f"scoring-{name}" / "kept.jsonl"),
              "batch_size": 64, "scoring": scoring, "start_method": "spawn",
              "process": [{"image_text_similarity_filter": {"hf_clip": str(model), "min_score": -1e9}}],
              **({"devices": ["cpu"]} if cpu else {})}
    pipe = Pipeline(recipe=recipe_from_dict(recipe, base_dir=str(out)))
    watch = _Watch(cpu, kill, out / f"scoring-{name}")
    with watch:
        summary = pipe.run(restart=True, progress=False, log=lambda *a: None)
    scores = {}
    for f in ("kept.jsonl", "kept.dropped.jsonl"):
        p = out / f"scoring-{name}" / f
        for line in p.read_text().splitlines() if p.exists() else ():
            rec = json.loads(line)
            scores[rec["id"]] = rec["__dj__stats__"]["image_text_similarity"]
    return {"summary": summary, "scores": scores, "busy": watch.busy(), "holders": sorted(watch.holders),
            "owners": sorted(watch.owners), "killed": watch.killed}


class _Watch:
    """While a run lasts: which processes hold GPU memory and how busy GPU 0 is (nvidia-smi), and,
    with `kill`, the scorer killed once the run has written its first batch (a state, not a time)."""

    def __init__(self, cpu: bool, kill: bool, folder: Path):
        self.cpu, self.kill, self.folder = cpu, kill, folder
        self.holders: set[int] = set()
        self.owners: set[int] = set()
        self.util: list[int] = []
        self.killed = False
        self._stop = threading.Event()
        self._threads: list = []

    def __enter__(self):
        if not self.cpu:
            self._threads.append(threading.Thread(target=self._sample, daemon=True))
        if self.kill:
            self._threads.append(threading.Thread(target=self._kill, daemon=True))
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join()

    def busy(self) -> float:
        return sum(self.util) / len(self.util) if self.util else float("nan")

    def _sample(self) -> None:
        from djx.tools.gpu_check import _name as process_name
        while not self._stop.wait(0.2):
            apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True).stdout
            for line in apps.strip().splitlines():
                pid = int(line.split(",")[0])
                self.holders.add(pid)
                if process_name(pid) == "djx-weights":
                    self.owners.add(pid)
            util = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                   "-i", "0"], capture_output=True, text=True).stdout.strip()
            if util.isdigit():
                self.util.append(int(util))

    def _kill(self) -> None:
        from djx.tools.gpu_check import _owner_pid as owner_pid
        part = self.folder / ".kept.djx-state"
        while not self._stop.is_set():
            written = any(p.stat().st_size > 0 for p in part.glob("*.jsonl.part")) if part.is_dir() else False
            pid = owner_pid() if written else None
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                self.killed = True
                return
            self._stop.wait(0.05)

