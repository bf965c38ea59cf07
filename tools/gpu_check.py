"""GPU check: run by hand on a machine with CUDA; never in CI.

    python tools/gpu_check.py [--np 4] [--recipe configs/demo.yaml]
    python tools/gpu_check.py --cpu          # the same report on CPU (checks this script only)

1. Placement and sharing: runs the demo with np workers (spawn) and prints, per worker rank, the
   device the plan gave it, the device it bound, its loads of each model (must be 1) and its peak
   device memory; rank r must sit on the plan's device (cuda:(r mod GPUs) when the GPUs have equal
   room).
2. OOM back-off for real: a full-size CLIP ViT-B/32 (random weights) in one worker whose memory
   cap is its weights plus 96 MiB, asked for one forward over a whole batch of 100 samples. CUDA
   OOMs must happen, the forward must halve until it fits, and every sample must be accounted for.
3. dtype: samples/s of that CLIP at float32 and bfloat16 on the GPU (bfloat16 is the fast one).
4. One copy per GPU: that CLIP (float32) in np workers on one GPU over 1000 samples, shared
   (one weight owner) and private: device memory per process (nvidia-smi, sampled) and each
   worker's torch.cuda.max_memory_allocated; the weights must be charged to the owner alone (each
   worker below a private worker by most of a copy). A second shared run kills a worker, then the
   weight owner, then another worker mid-run and must recover from all three; the scores of every
   run must equal the private GPU run's and be within 1e-4 of the CPU path's (float32).
5. Scoring in one place per device (`scoring: device`, tools/gpu_check_scoring.py): one CUDA
   context per GPU (only the scorers hold GPU memory), scores within 1e-4 of `scoring: workers`,
   a scorer killed mid-run recovered from, samples/s and the GPU's busy share of both.
6. GPU decode (`image_decode: device`, tools/gpu_check_decode.py): full-size CLIP and BLIP score the
   test photos decoded on the host and on the GPU: max score difference (<= 1e-4 float32, <= 1e-3
   bfloat16) and images/s of each path.

Exit code 0 when every check passes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUIET = {"progress": False, "log": lambda *a: None}


def placement(recipe: str, np: int, out: Path, cpu: bool) -> bool:
    from djx import Pipeline
    keys = {"np": np, "start_method": "spawn", "export_path": str(out / "demo.jsonl")}
    if cpu:
        keys["devices"] = ["cpu"]
    pipe = Pipeline.from_recipe(recipe, keys)
    plan = pipe.plan(np)
    print(plan.describe())
    t0 = time.monotonic()
    s = pipe.run(restart=True, plan=plan, **QUIET)
    wall = time.monotonic() - t0
    print(f"\n{'rank':>4}  {'planned':<8}  {'bound':<8}  {'model loads':<58}  peak device memory")
    ok = s["check"]["ok"] and len(s["devices"]) == plan.workers
    for rank in range(plan.workers):
        dev = s["devices"].get(str(rank), s["devices"].get(rank, {}))
        loads = s["model_loads"].get(str(rank), s["model_loads"].get(rank, {}))
        bound = dev.get("device") or "?"
        print(f"{rank:>4}  {plan.devices[rank]:<8}  {bound:<8}  {json.dumps(loads):<58}  "
              f"{dev.get('peak_device_bytes', 0) / (1 << 20):,.0f} MiB")
        ok = ok and bound == plan.devices[rank] and loads and all(n == 1 for n in loads.values())
    if not cpu:
        ok = ok and all(d.startswith("cuda") for d in plan.devices)
    print(f"{s['input']} in = {s['kept']} kept + {s['dropped']} dropped + {s['rejected']} rejected "
          f"in {wall:.1f} s; check {'passed' if s['check']['ok'] else 'FAILED'}")
    print(f"placement and sharing: {'passed' if ok else 'FAILED'}")
    return bool(ok)


def oom_backoff(out: Path) -> bool:
    import torch

    from djx import Pipeline
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    from djx.tools.bench import save_full_size, write_dataset
    model = save_full_size("clip", out / "models")
    weights = sum(f.stat().st_size for f in model.glob("*.safetensors"))
    data = write_dataset(out / "oom", 200, n_images=200, size=256)
    op = ImageTextSimilarityFilter(hf_clip=str(model), min_score=-1e9, forward_batch_size=100_000)
    # private: a shared copy lives in the weight owner, outside the worker's capped allocator
    pipe = Pipeline(ops=[op], np=1, batch_size=100, start_method="spawn", dataset_path=str(data),
                    share_models=False)
    total = torch.cuda.get_device_properties(0).total_memory
    cap = weights + (96 << 20)
    plan = replace(pipe.plan(1), mem_fraction=(cap / total,))
    print(f"\nOOM back-off: weights {weights >> 20} MiB, worker cap {cap >> 20} MiB "
          f"(fraction {cap / total:.5f}), one requested forward of 100 pairs")
    s = pipe.run(str(data), str(out / "oom" / "out" / "kept.jsonl"), restart=True, plan=plan, **QUIET)
    retries = s["events"].get("oom_retries", 0)
    print(f"{retries} OOM retries, {s['events'].get('forwards', 0)} forwards; {s['input']} in = "
          f"{s['kept']} kept + {s['dropped']} dropped + {s['rejected']} rejected; "
          f"check {'passed' if s['check']['ok'] else 'FAILED'}")
    ok = s["check"]["ok"] and retries > 0 and s["kept"] + s["dropped"] + s["rejected"] == s["input"]
    print(f"OOM back-off: {'passed' if ok else 'FAILED'}")
    return bool(ok)


def dtypes(out: Path) -> None:
    from djx import Pipeline
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    from djx.tools.bench import save_full_size, write_dataset
    model = out / "models" / "clip"
    if not model.is_dir():
        save_full_size("clip", out / "models")
    data = write_dataset(out / "speed", 1024, n_images=256, size=256)
    print()
    for dtype in ("float32", "bfloat16"):
        op = ImageTextSimilarityFilter(hf_clip=str(model), min_score=-1e9, dtype=dtype,
                                       forward_batch_size=256)
        pipe = Pipeline(ops=[op], np=1, batch_size=256, start_method="spawn", dataset_path=str(data))
        s = pipe.run(str(data), str(out / "speed" / dtype / "kept.jsonl"), restart=True, **QUIET)
        print(f"CLIP ViT-B/32 {dtype:<8} on {s['plan']['devices'][0]}: "
              f"{s['samples_per_second']:,.0f} samples/s ({s['input']} samples, model load included)")


DIE_ONCE = """
import os, signal
from djx import Mapper, register_op

@register_op("gpu_check_die_once")
class DieOnce(Mapper):
    def __init__(self, at: int = 0, marker: str = "", after: str = "", **common):
        super().__init__(**common)
        self.at, self.marker, self.after = at, marker, after

    def process(self, batch):
        hit = any(s.get("id") == self.at for s in batch.samples)
        if hit and not os.path.exists(self.marker) and (not self.after or os.path.exists(self.after)):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return batch
"""


def _smi_sampler():
    from djx.tools.bench import Sampler

    class SmiSampler(Sampler):
        """Peak device memory of each process, read from nvidia-smi every 0.2 s while a run lasts."""

        def __init__(self):
            super().__init__(0.2)
            self.peak: dict[int, int] = {}
            self.owners: set[int] = set()  # the pids of weight owners
            self.peak_total = 0

        def sample(self):
            import subprocess
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
            total = 0
            for line in out.strip().splitlines():
                pid, mib = (int(x) for x in line.split(","))
                if pid not in self.peak and _name(pid) == "djx-weights":
                    self.owners.add(pid)
                self.peak[pid] = max(self.peak.get(pid, 0), mib)
                total += mib
            self.peak_total = max(self.peak_total, total)

    return SmiSampler()


def _name(pid: int) -> str:
    import psutil
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""


def _owner_pid() -> int | None:
    import psutil
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "djx-weights":
                return child.pid
        except psutil.Error:
            continue
    return None


def sharing(out: Path, np: int) -> bool:
    import os
    import signal
    import threading

    import psutil

    from djx import Pipeline
    from djx.core.recipe.recipe import recipe_from_dict
    from djx.tools.bench import save_full_size, write_dataset
    model = out / "models" / "clip"
    if not model.is_dir():
        save_full_size("clip", out / "models")
    data = write_dataset(out / "share", 1000, n_images=200, size=256)
    plugin = out / "die_once.py"
    plugin.write_text(DIE_ONCE)
    marks = out / "marks"
    marks.mkdir(exist_ok=True)
    weights = sum(f.stat().st_size for f in model.glob("*.safetensors"))

    def run(name: str, share: bool, devices: list | None = None, kills: bool = False):
        ops = [{"image_text_similarity_filter": {"hf_clip": str(model), "min_score": -1e9}}]
        if kills:  # a worker at id 100; the owner once that has happened (below); a worker at id 700
            ops = [{"gpu_check_die_once": {"at": 100, "marker": str(marks / "worker1")}},
                   {"gpu_check_die_once": {"at": 700, "marker": str(marks / "worker2"),
                                           "after": str(marks / "owner")}}] + ops
        recipe = {"dataset_path": str(data), "export_path": str(out / name / "kept.jsonl"), "np": np,
                  "batch_size": 32, "share_models": share, "custom_ops": [str(plugin)], "process": ops,
                  **({"devices": devices} if devices else {})}
        pipe = Pipeline(recipe=recipe_from_dict(recipe, base_dir=str(out)))
        logs: list[str] = []
        killer = None
        if kills:
            def kill_owner():  # waits for a state: the first worker killed, then an owner to kill
                while not (marks / "worker1").exists():
                    threading.Event().wait(0.05)
                pid = None
                while pid is None:
                    pid = _owner_pid()
                os.kill(pid, signal.SIGKILL)
                (marks / "owner").write_text(str(pid))
            killer = threading.Thread(target=kill_owner, daemon=True)
            killer.start()
        with _smi_sampler() as smi:
            s = pipe.run(restart=True, progress=False, log=logs.append)
        scores = {}
        for f in ("kept.jsonl", "kept.dropped.jsonl"):
            p = out / name / f
            if p.exists():
                for line in p.read_text().splitlines():
                    rec = json.loads(line)
                    v = rec["__dj__stats__"]["image_text_similarity"]
                    scores[rec["id"]] = v if isinstance(v, list) else [v]  # one per image
        me = psutil.Process().pid
        return s, scores, smi, [ln for ln in logs if "weight owner" in ln], me

    print(f"\none copy per GPU: CLIP ViT-B/32 float32 ({weights >> 20} MiB of weights), np={np}, 1000 samples")
    shared, sc_shared, smi_shared, _, _ = run("shared", True)
    private, sc_private, smi_private, _, _ = run("private", False)
    killed, sc_killed, smi_killed, owner_logs, _ = run("killed", True, kills=True)
    cpu, sc_cpu, _, _, _ = run("cpu", False, devices=["cpu"])
    for name, s, smi in (("shared", shared, smi_shared), ("private", private, smi_private),
                         ("killed", killed, smi_killed)):
        owners = sorted((smi.peak[p] for p in smi.owners), reverse=True)
        workers = sorted((m for p, m in smi.peak.items() if p not in smi.owners), reverse=True)
        alloc = [s["devices"][r]["peak_device_bytes"] >> 20 for r in sorted(s["devices"])]
        print(f"  {name:<8} peak device memory of the run {smi.peak_total:,} MiB; per process (nvidia-smi, MiB): "
              f"owner {owners}, workers {workers}; workers' max_memory_allocated (MiB) {alloc}; "
              f"{s['samples_per_second']:.0f} samples/s (start-up {s['timing']['startup_seconds']:.1f} s, then "
              f"{s['timing']['steady_samples_per_second']:.0f} samples/s); worker restarts {s['worker_restarts']}")
    for line in owner_logs:
        print("  log (killed): " + line)
    same_ids = set(sc_shared) == set(sc_private) == set(sc_cpu) == set(sc_killed) == set(range(1000))
    def max_diff(a: dict, b: dict) -> float:
        return max(abs(x - y) for i in a for x, y in zip(a[i], b[i], strict=True))
    diff_private = max(max_diff(sc_shared, sc_private), max_diff(sc_killed, sc_private))
    diff_cpu = max_diff(sc_shared, sc_cpu)
    print(f"  all 1000 scored in each run: {same_ids}; max |shared or killed - private GPU| {diff_private:.2e}; "
          f"max |shared - CPU| {diff_cpu:.2e}")
    kills = all((marks / m).exists() for m in ("worker1", "owner", "worker2"))
    saved = smi_private.peak_total - smi_shared.peak_total
    mib = weights / (1 << 20)
    worst_shared = max(m for p, m in smi_shared.peak.items() if p not in smi_shared.owners)
    weights_in_owner = (len(smi_shared.owners) == 1 and worst_shared < min(smi_private.peak.values()) - 0.8 * mib
                        and all(shared["devices"][r]["peak_device_bytes"] < private["devices"][r]["peak_device_bytes"]
                                - 0.8 * weights for r in shared["devices"]))
    ok = (same_ids and diff_private == 0.0 and diff_cpu <= 1e-4 and kills and killed["worker_restarts"] == 2
          and len(owner_logs) == 1 and shared["check"]["ok"] and killed["check"]["ok"] and weights_in_owner)
    print(f"  kills done: {kills}; weights charged to the owner alone: {weights_in_owner}; device memory "
          f"saved by sharing {saved:,} MiB ({np - 1} copies of {mib:,.0f} MiB, less the owner's CUDA context)")
    print(f"one copy per GPU: {'passed' if ok else 'FAILED'}")
    return bool(ok)


def main() -> int:
    ap = argparse.ArgumentParser(description="djx GPU check (placement, sharing, OOM back-off)")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--recipe", default=str(REPO / "configs" / "demo.yaml"))
    ap.add_argument("--cpu", action="store_true", help="run the placement report on CPU only")
    ap.add_argument("--only", choices=("placement", "oom", "dtypes", "sharing", "scoring", "decode"),
                    help="one check")
    args = ap.parse_args()
    import torch
    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device visible: nothing to check (use --cpu to try the report on CPU)")
        return 1
    if not args.cpu:
        print(f"CUDA devices: {torch.cuda.device_count()} ({torch.cuda.get_device_name(0)})")
    out = Path(tempfile.mkdtemp(prefix="djx-gpu-"))
    try:
        def want(name: str) -> bool:
            return args.only in (None, name) and (name == "placement" or not args.cpu)
        ok = placement(args.recipe, args.np, out, args.cpu) if want("placement") else True
        if want("oom"):
            ok = oom_backoff(out) and ok
        if want("dtypes"):
            dtypes(out)
        if want("sharing"):
            ok = sharing(out, args.np) and ok
        if want("scoring") or (args.cpu and args.only == "scoring"):  # --cpu --only scoring: this check's script
            from djx.tools.gpu_check_scoring import scoring
            ok = scoring(out, args.cpu) and ok
        if want("decode"):
            from djx.tools.gpu_check_decode import decode_check
            ok = decode_check(out) and ok
        print("GPU check " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
