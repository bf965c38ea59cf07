"""djx side by side with Data-Juicer on the same work, ratios measured in one run.

    python tools/bench.py dj --dj-venv DJ_VENV [--n 1000] [--np 2] [--private]

DJ_VENV is a venv with Data-Juicer installed (`../shared/anchors/dj_install.sh DJ_VENV`). Both
tools run image_text_similarity_filter with a full-size CLIP ViT-B/32 (random weights, float32,
`min_score: 0`) over the same n one-image samples (200 synthetic JPEGs of 256-512 px, cycled),
each as its own command (`dj-process`, `djx process`), so imports and model loading count on both
sides. Reported: wall time and peak PSS of the whole process tree (PSS charges a page shared by N
processes 1/N to each, so one model copy mapped by two workers counts once), their ratios (goals:
djx PSS <= 0.6x, speed >= 2.0x), and how well the two agree: the kept ids and the largest
difference between the scores of samples both kept. `--private` adds a djx run with
`share_models: false`. The model is written by the Data-Juicer venv's transformers, as a model on
a user's disk was written by an older release than djx's.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "assets" / "models"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}

MAKE_CLIP = """
import sys, torch
from transformers import AutoProcessor, CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor
torch.manual_seed(0)
tok = AutoProcessor.from_pretrained(sys.argv[1]).tokenizer
CLIPModel(CLIPConfig()).save_pretrained(sys.argv[2])
CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok).save_pretrained(sys.argv[2])
"""


def write_data(folder: Path, n: int, n_images: int = 200) -> Path:
    """n one-image samples cycling over n_images JPEGs of 256-512 px (absolute paths, which both
    tools read the same way)."""
    sys.path.insert(0, str(REPO))
    from tools import synth
    rng = random.Random(0)
    img_dir = folder / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    caps = []
    for i in range(n_images):
        image, cap, _ = synth.random_pair(rng, size=(rng.randint(256, 512), rng.randint(256, 512)))
        image.save(img_dir / f"{i}.jpg", quality=90)
        caps.append(cap)
    path = folder / "data.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            k = i % n_images
            f.write(json.dumps({"id": i, "text": f"<__dj__image> {caps[k]}",
                                "images": [str(img_dir / f"{k}.jpg")]}) + "\n")
    return path


def _timed(cmd: list[str], env: dict, log: Path) -> tuple[float, int]:
    """Wall seconds and peak PSS of the command's whole tree (this process included, which is the
    same small constant on both sides)."""
    from tools.bench import TreeMemory
    with TreeMemory(every=0.25) as mem, open(log, "w") as out:
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
        wall = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"{cmd[0]} exited {rc}; its output: {log}\n" + log.read_text()[-3000:])
    return wall, mem.peak_pss


def _scores(path: Path, field: str) -> dict:
    """id -> image_text_similarity of every sample in a JSON Lines export."""
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            value = rec[field]["image_text_similarity"]
            out[rec["id"]] = value[0] if isinstance(value, list) else value
    return out


def _dj_export(folder: Path) -> Path:
    """Data-Juicer's kept samples (its export may be one file or `<stem>-<i>-of-<n>` shards)."""
    parts = sorted(p for p in folder.glob("dj*.jsonl") if "stats" not in p.name)
    if len(parts) == 1:
        return parts[0]
    merged = folder / "dj-merged.jsonl"
    merged.write_text("".join(p.read_text() for p in parts))
    return merged


def bench_dj(work: Path, dj_venv: Path, n: int, np_: int, private: bool) -> list[tuple]:
    from tools.bench import mb
    dj_bin = dj_venv / "bin"
    if not (dj_bin / "dj-process").exists():
        sys.exit(f"{dj_bin / 'dj-process'} not found: install Data-Juicer with ../shared/anchors/dj_install.sh")
    env = {**os.environ, **OFFLINE}
    clip = work / "clip-b32"
    subprocess.run([str(dj_bin / "python"), "-c", MAKE_CLIP, str(TINY / "tiny-clip"), str(clip)], env=env,
                   check=True)
    data = write_data(work / "data", n)
    op = {"image_text_similarity_filter": {"hf_clip": str(clip), "min_score": 0.0, "max_score": 1.0}}
    dj_out = work / "dj_out"
    (work / "dj.yaml").write_text(json.dumps({
        "project_name": "bench", "dataset_path": str(data), "export_path": str(dj_out / "dj.jsonl"), "np": np_,
        "work_dir": str(work / "dj_work"), "use_cache": False, "open_monitor": False, "open_tracer": False,
        "keep_stats_in_res_ds": True, "process": [op]}))
    runs = [("djx", True)] + ([("djx share_models: false", False)] if private else [])
    results = {}
    for name, share in runs:
        out = work / name.split()[0] / str(share)
        recipe = work / f"djx_{share}.yaml"
        recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(out / "o.jsonl"), "np": np_,
                                      "share_models": share, "process": [op]}))
        results[name] = _timed([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"], env,
                               work / f"{name.split()[0]}_{share}.log")
        results[name] += (_scores(out / "o.jsonl", "__dj__stats__"),)
    results["dj"] = _timed([str(dj_bin / "dj-process"), "--config", str(work / "dj.yaml")], env, work / "dj.log")
    results["dj"] += (_scores(_dj_export(dj_out), "__dj__stats__"),)
    dj_wall, dj_pss, dj_scores = results["dj"]
    rows = [(f"Data-Juicer, {n} pairs, np={np_}", f"{dj_wall:.1f} s", f"peak PSS {mb(dj_pss)}", "")]
    for name, _ in runs:
        wall, pss, scores = results[name]
        both = scores.keys() & dj_scores.keys()
        diff = max((abs(scores[i] - dj_scores[i]) for i in both), default=float("nan"))
        rows.append((f"{name}, {n} pairs, np={np_}", f"{wall:.1f} s", f"peak PSS {mb(pss)}",
                     f"speed x{dj_wall / wall:.2f} of Data-Juicer (goal >= 2.0), PSS x{pss / dj_pss:.2f} (goal <= 0.6); "
                     f"kept {len(scores)} vs {len(dj_scores)}, same ids: {scores.keys() == dj_scores.keys()}, "
                     f"max score diff {diff:.2e}"))
    return rows
