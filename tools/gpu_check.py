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
    pipe = Pipeline(ops=[op], np=1, batch_size=100, start_method="spawn", dataset_path=str(data))
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


def main() -> int:
    ap = argparse.ArgumentParser(description="djx GPU check (placement, sharing, OOM back-off)")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--recipe", default=str(REPO / "configs" / "demo.yaml"))
    ap.add_argument("--cpu", action="store_true", help="run the placement report on CPU only")
    args = ap.parse_args()
    import torch
    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device visible: nothing to check (use --cpu to try the report on CPU)")
        return 1
    if not args.cpu:
        print(f"CUDA devices: {torch.cuda.device_count()} ({torch.cuda.get_device_name(0)})")
    out = Path(tempfile.mkdtemp(prefix="djx-gpu-"))
    try:
        ok = placement(args.recipe, args.np, out, args.cpu)
        if not args.cpu:
            ok = oom_backoff(out) and ok
            dtypes(out)
        print("GPU check " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
