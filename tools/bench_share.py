"""Benchmarks of one model copy per machine and of start-up, as ratios within one run.

    python tools/bench.py share [--n 192]    peak PSS of the whole process tree, np=2 over np=1, with
                                             full-size CLIP ViT-B/32 (random weights), sharing on and
                                             off; samples/s of each CPU layout (processes x threads)
    python tools/bench.py startup            a one-sample recipe (tiny CLIP) through `djx process`
                                             against a bare Python that imports torch and
                                             transformers and loads the same model
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "assets" / "models"


def _run(clip: Path, data: Path, out: Path, np_: int, share: bool, method: str = "auto") -> tuple[float, int, dict]:
    """samples/s, peak PSS of the tree, and the summary of one run (`method`: the start method)."""
    from djx import Pipeline
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    pipe = Pipeline(ops=[ImageTextSimilarityFilter(hf_clip=str(clip), min_score=-1e9)], np=np_, batch_size=32,
                    start_method=method, share_models=share)
    from tools.bench import TreeMemory
    with TreeMemory(every=0.05) as s:
        t0 = time.perf_counter()
        summary = pipe.run(str(data), str(out / "o.jsonl"), progress=False, log=lambda *a: None)
        dt = time.perf_counter() - t0
    return summary["input"] / dt, s.peak_pss, summary


def bench_share(work: Path, n: int) -> list[tuple]:
    """Peak PSS (whole tree) at np=2 over np=1 with sharing (goal <= 1.15) and without; the
    throughput of 1 process x all threads against 1 thread per process."""
    sys.path.insert(0, str(REPO))
    from tools.bench import mb, save_full_size, write_dataset
    clip = save_full_size("clip", work / "models")
    data = write_dataset(work / "data", n, n_images=min(n, 64), size=256)
    cores = psutil.cpu_count(logical=True) or 1
    res = {}
    for np_, share, method in ((1, True, "auto"), (cores, True, "auto"), (cores, False, "auto"), (cores, True, "spawn")):
        res[(np_, share, method)] = _run(clip, data, work / f"out_{np_}_{share}_{method}", np_, share, method)
    one, many, many_private = res[(1, True, "auto")], res[(cores, True, "auto")], res[(cores, False, "auto")]
    many_spawn = res[(cores, True, "spawn")]
    weights = many[2]["memory"].get("shared_weight_bytes_per_device", {}).get("cpu", 0)
    return [
        (f"peak PSS, whole tree, CLIP B/32, {n} pairs", f"np=1 {mb(one[1])}", f"np={cores} {mb(many[1])}",
         f"np{cores}/np1 x{many[1] / one[1]:.2f} shared (one copy {mb(weights)})"),
        ("", "", f"np={cores} private {mb(many_private[1])}",
         f"np{cores}/np1 x{many_private[1] / one[1]:.2f} share_models: false"),
        ("", "", f"np={cores} spawn {mb(many_spawn[1])}", f"np{cores}/np1 x{many_spawn[1] / one[1]:.2f} shared, "
         "workers spawned (each imports torch itself)"),
        ("samples/s by CPU layout (shared)", f"1x{cores} threads {one[0]:.2f}",
         f"{cores}x1 thread {many[0]:.2f}", f"ratio {many[0] / one[0]:.2f}"),
    ]


BARE = """
import time; t0 = time.perf_counter()
import torch, transformers
transformers.CLIPModel.from_pretrained({path!r}); transformers.AutoProcessor.from_pretrained({path!r})
print(time.perf_counter() - t0)
"""


def bench_startup(work: Path) -> list[tuple]:
    """Wall time of a one-sample recipe against the bare import-and-load cost (best of 3 each)."""
    import json
    sys.path.insert(0, str(REPO))
    from tools.bench import write_dataset
    data = write_dataset(work / "one", 1, n_images=1, size=64)
    recipe = work / "one.yaml"
    recipe.write_text(json.dumps({
        "dataset_path": str(data), "export_path": str(work / "one" / "out" / "o.jsonl"), "np": 1,
        "process": [{"image_text_similarity_filter": {"hf_clip": str(TINY / "tiny-clip"), "min_score": -1.0}}]}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    bare, djx = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", BARE.format(path=str(TINY / "tiny-clip"))], env=env, check=True,
                       capture_output=True)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet", "--restart"], env=env,
                       check=True, capture_output=True)
        djx.append(time.perf_counter() - t0)
    return [("start-up, one sample, tiny CLIP", f"bare python {min(bare):.2f} s", f"djx {min(djx):.2f} s",
             f"overhead {min(djx) - min(bare):.2f} s")]
