"""Peak memory of a five-model image recipe: djx at np=1 against np=4 and np=cores, and Data-Juicer.

    python tools/bench_vision_memory.py --dj-venv DJ_VENV [--n 16] [--nps 1,4] [--work DIR] [--no-dj]

The recipe: image_text_similarity_filter (CLIP ViT-B/32), image_text_matching_filter (BLIP ITM
base), image_aesthetics_filter (shunk031's layout: CLIP ViT-L/14 vision + projection, the v2 linear
head), image_nsfw_filter and image_watermark_filter (ViT-B/16 classifiers), every model full size
with random weights, built from the default configs (no download). The models are written by
Data-Juicer's venv (its transformers, and the simple-aesthetics-predictor package's own class for
the aesthetics model), as a user's downloaded models would be. Thresholds are wide open, so every
sample goes through every model. Each run is its own command (`djx process`, `dj-process`), timed,
with the peak PSS of its whole process tree sampled (PSS charges a page shared by N processes 1/N
to each: djx's one shared copy of the weights counts once): djx and Data-Juicer at np = cores, then
djx at each of --nps (goal: np=4 within 1.2x of np=1). Each run's line is printed as it ends.
Batches of 2 samples, so that every worker gets work.
Heavy: about 3.4 GB of weights per copy.

Data-Juicer runs the recipe op by op, each in a fresh pool of np processes that loads only that op's
model, and caps np at the cores: its peak is about np copies of the largest model. djx holds the
recipe's five models at once, one copy mapped by every worker: its peak is one copy of all of them
plus each worker's own memory, whatever np. Measured on 2 shared cores, 8 samples, one run each:
djx np=1 3,774 MB, np=4 4,392 MB (x1.16); np=2 djx 3,978 MB, Data-Juicer 3,376 MB (x1.18; it took
np=4 as 2: 3,329 MB).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tools.bench import TINY, TreeMemory, mb  # noqa: E402
from tools.bench_dj import OFFLINE, write_data  # noqa: E402

MAKE_MODELS = """
import sys, torch
from pathlib import Path
from transformers import (AutoProcessor, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor, BlipProcessor,
                          CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPVisionConfig, ViTConfig,
                          ViTForImageClassification, ViTImageProcessor)
from aesthetics_predictor import AestheticsPredictorV2Linear
tiny, out = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
clip_tok = AutoProcessor.from_pretrained(tiny / "tiny-clip").tokenizer
CLIPModel(CLIPConfig()).save_pretrained(out / "clip")
CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=clip_tok).save_pretrained(out / "clip")
BlipForImageTextRetrieval(BlipConfig()).save_pretrained(out / "blip")
blip_tok = AutoProcessor.from_pretrained(tiny / "tiny-blip-itm").tokenizer
BlipProcessor(image_processor=BlipImageProcessor(), tokenizer=blip_tok).save_pretrained(out / "blip")
l14 = CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                       patch_size=14, image_size=224, projection_dim=768)
name = "aesthetics-predictor-v2-linear"
AestheticsPredictorV2Linear(l14).save_pretrained(out / name)
CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=clip_tok).save_pretrained(out / name)
for kind in ("nsfw", "watermark"):
    labels = {0: "normal", 1: kind}
    ViTForImageClassification(ViTConfig(id2label=labels, label2id={v: k for k, v in labels.items()})
                              ).save_pretrained(out / kind)
    ViTImageProcessor().save_pretrained(out / kind)
"""


def ops(models: Path) -> list[dict]:
    return [
        {"image_text_similarity_filter": {"hf_clip": str(models / "clip"), "min_score": -1.0, "max_score": 1.0}},
        {"image_text_matching_filter": {"hf_blip": str(models / "blip"), "min_score": 0.0, "max_score": 1.0}},
        {"image_aesthetics_filter": {"hf_scorer_model": str(models / "aesthetics-predictor-v2-linear"),
                                     "min_score": -1e9, "max_score": 1e9}},
        {"image_nsfw_filter": {"hf_nsfw_model": str(models / "nsfw"), "min_score": 0.0, "max_score": 1.0}},
        {"image_watermark_filter": {"hf_watermark_model": str(models / "watermark"), "prob_threshold": 1.0}},
    ]


def timed(cmd: list[str], log: Path) -> tuple[float, int]:
    """Wall seconds and peak PSS of the command's whole tree (this process included)."""
    with TreeMemory(every=0.25) as mem, open(log, "w") as out:
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env={**os.environ, **OFFLINE}, stdout=out, stderr=subprocess.STDOUT).returncode
        wall = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"{cmd[0]} exited {rc}; its output: {log}\n" + log.read_text()[-3000:])
    return wall, mem.peak_pss


def kept(path: Path) -> int:
    return sum(1 for line in open(path) if line.strip())


def run_djx(work: Path, data: Path, models: Path, np_: int) -> dict:
    out = work / f"djx_np{np_}"
    recipe = work / f"djx_np{np_}.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(out / "o.jsonl"), "np": np_,
                                  "batch_size": 2, "process": ops(models)}))
    wall, pss = timed([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"], work / f"djx_np{np_}.log")
    summary = json.loads((out / "o.summary.json").read_text())
    return {"tool": "djx", "np": np_, "wall_s": round(wall, 1), "peak_pss": pss, "kept": kept(out / "o.jsonl"),
            "shared_weights": summary.get("memory", {}).get("shared_weight_bytes_per_device", {})}


def run_dj(work: Path, data: Path, models: Path, np_: int, dj_venv: Path) -> dict:
    out = work / "dj_out"
    recipe = work / "dj.yaml"
    recipe.write_text(json.dumps({
        "project_name": "bench-vision", "dataset_path": str(data), "export_path": str(out / "dj.jsonl"), "np": np_,
        "work_dir": str(work / "dj_work"), "use_cache": False, "open_monitor": False, "open_tracer": False,
        "skip_op_error": False, "op_fusion": False, "keep_stats_in_res_ds": True, "process": ops(models)}))
    wall, pss = timed([str(dj_venv / "bin" / "dj-process"), "--config", str(recipe)], work / "dj.log")
    rows = sum(kept(p) for p in out.glob("dj*.jsonl") if "stats" not in p.name)
    return {"tool": "Data-Juicer 1.6.1", "np": np_, "wall_s": round(wall, 1), "peak_pss": pss, "kept": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dj-venv", type=Path, required=True, help="a venv with Data-Juicer (the models are written by it)")
    parser.add_argument("--n", type=int, default=16, help="one-image samples")
    parser.add_argument("--nps", default="1,4", help="djx's np values besides the number of cores")
    parser.add_argument("--work", type=Path, help="keep models and outputs here (default: a temporary folder)")
    parser.add_argument("--no-dj", action="store_true", help="djx runs only, at --nps")
    args = parser.parse_args()
    cores = psutil.cpu_count(logical=True) or 1
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        models = work / "models"
        if "v1" in str(models):  # Data-Juicer picks the aesthetics head by substrings of the path
            sys.exit(f"the work folder's path must not contain 'v1': {models}")
        if not (models / "watermark" / "config.json").exists():
            subprocess.run([str(args.dj_venv / "bin" / "python"), "-c", MAKE_MODELS, str(TINY), str(models)],
                           env={**os.environ, **OFFLINE}, check=True)
        data = write_data(work / "data", args.n, n_images=min(args.n, 32))
        nps = [int(x) for x in args.nps.split(",")]
        runs = [] if args.no_dj else [("djx", cores), ("dj", cores)]  # djx alone: only --nps
        runs += [("djx", np_) for np_ in nps if args.no_dj or np_ != cores]
        results = []
        for tool, np_ in runs:
            r = run_djx(work, data, models, np_) if tool == "djx" else run_dj(work, data, models, np_, args.dj_venv)
            results.append(r)
            print(f"{r['tool']:<18} np={r['np']:<3} {r['wall_s']:>7.1f} s  peak PSS {mb(r['peak_pss']):>10}  "
                  f"kept {r['kept']}/{args.n}", flush=True)
    by_np = {r["np"]: r["peak_pss"] for r in results if r["tool"] == "djx"}
    dj = next((r["peak_pss"] for r in results if r["tool"] != "djx"), None)
    if dj and cores in by_np:
        print(f"djx / Data-Juicer peak PSS at np={cores}: x{by_np[cores] / dj:.2f}")
    if 1 in by_np and 4 in by_np:
        print(f"djx np=4 / np=1 peak PSS: x{by_np[4] / by_np[1]:.2f} (goal <= 1.2)")
    print(json.dumps({"n": args.n, "cores": cores, "results": results}))


if __name__ == "__main__":
    main()
