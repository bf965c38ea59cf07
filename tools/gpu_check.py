"""GPU check (run by hand on a machine with CUDA; never in CI).

    python tools/gpu_check.py [--np 4] [--recipe configs/demo.yaml]

1. Runs the demo on CUDA with np workers (spawn) and prints, per worker: its device, its model
   loads (must be 1 per model) and its peak device memory; then the plan and the counts.
2. OOM back-off for real: the demo's CLIP filter with a per-worker memory cap just above the model
   and a forward batch far too large for it; CUDA OOMs happen, the batch halves, and the run must
   end with every sample accounted for and (nearly) none rejected.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--recipe", default=str(REPO / "configs" / "demo.yaml"))
    args = ap.parse_args()
    import torch

    from djx import Pipeline
    if not torch.cuda.is_available():
        print("no CUDA device visible: nothing to check")
        return 1
    print(f"CUDA devices: {torch.cuda.device_count()} ({torch.cuda.get_device_name(0)})")
    out = Path(tempfile.mkdtemp(prefix="djx-gpu-"))
    try:
        pipe = Pipeline.from_recipe(args.recipe, {"np": args.np, "start_method": "spawn",
                                                  "export_path": str(out / "demo.jsonl")})
        summary = pipe.run(restart=True, progress=False)
        print("\nworker  device    model loads                               peak device memory")
        for rank, dev in sorted(summary["devices"].items(), key=lambda kv: int(kv[0])):
            loads = summary["model_loads"].get(rank, {})
            print(f"{rank:>6}  {dev['device']:<8}  {json.dumps(loads):<40}  "
                  f"{dev['peak_device_bytes'] / (1 << 20):,.0f} MB")
        ok = (summary["check"]["ok"] and summary["max_model_loads_per_process"] <= 2
              and all(d["device"].startswith("cuda") for d in summary["devices"].values()))
        print(f"\nplan devices: {summary['plan']['devices']}; counts: {summary['input']} in = "
              f"{summary['kept']} kept + {summary['dropped']} dropped + {summary['rejected']} rejected")

        # 2. real OOMs: cap each worker just above the model, ask for huge forwards
        recipe = Pipeline.from_recipe(args.recipe).recipe
        clip = next(p for name, p in recipe.process if name == "image_text_similarity_filter")
        total = torch.cuda.get_device_properties(0).total_memory
        oom = Pipeline.from_recipe(args.recipe, {
            "np": 1, "start_method": "spawn", "export_path": str(out / "oom.jsonl"), "batch_size": 100,
            "process": [{"image_text_similarity_filter": {**clip, "forward_batch_size": 100_000}}]})
        # a hard cap of ~64 MB for the worker: far less than a 100-image forward at full size
        from dataclasses import replace
        capped = replace(oom.plan(1), mem_fraction=((64 << 20) / total,))
        s2 = oom.run(restart=True, progress=False, plan=capped)
        print(f"OOM check: {s2['events'].get('oom_retries', 0)} OOM retries; {s2['input']} in = {s2['kept']} kept + {s2['dropped']} dropped + "
              f"{s2['rejected']} rejected; check {'passed' if s2['check']['ok'] else 'FAILED'}")
        ok = ok and s2["check"]["ok"] and s2["events"].get("oom_retries", 0) > 0
        print("GPU check " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
