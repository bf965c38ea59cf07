"""Data-Juicer 1.6.1's own numbers for the image-only model filters, on the shipped tiny models.

    python tools/dj_fixtures/image_models.py --dj-venv /path/to/dj-venv

Runs image_aesthetics_filter, image_nsfw_filter and image_watermark_filter through `dj-process`
(offline, skip_op_error: false, op_fusion: false, thresholds wide open so every sample is kept
with its stats) over the demo images plus extra files written here (tests/assets/dj_fixtures/
image_models/: EXIF orientations, PNG with alpha, greyscale, 16-bit, palette GIF, WebP, CMYK JPEG,
BMP), a sample with several images, one naming an image twice and one without images. Writes
tests/assets/dj_fixtures/image_models.json: per sample its image paths (relative to the
repository) and Data-Juicer's stats. tests/test_image_model_filters.py compares djx with it.

The models come from tools/make_vision_test_models.py; run that first if they are missing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "assets" / "models"
EXTRA = REPO / "tests" / "assets" / "dj_fixtures" / "image_models"
OUT = REPO / "tests" / "assets" / "dj_fixtures" / "image_models.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}
WIDE = {"min_score": -1000.0, "max_score": 1000.0}
OPS = [
    {"image_aesthetics_filter": {"hf_scorer_model": str(MODELS / "tiny-aesthetics-predictor-v2-linear"), **WIDE}},
    {"image_nsfw_filter": {"hf_nsfw_model": str(MODELS / "tiny-vit-nsfw"), **WIDE}},
    {"image_watermark_filter": {"hf_watermark_model": str(MODELS / "tiny-vit-watermark"), "prob_threshold": 1.0}},
]


def picture(seed: int, size: tuple[int, int]) -> Image.Image:
    """A smooth random colour field with noise: photo-like statistics, a few KB as a file."""
    rng = np.random.default_rng(seed)
    w, h = size
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    base = np.stack([np.sin(x * rng.uniform(2, 9) + rng.uniform(0, 6)) + np.cos(y * rng.uniform(2, 9))
                     for _ in range(3)], axis=-1)
    pixels = (base - base.min()) / (np.ptp(base) + 1e-9) * 220 + rng.normal(0, 12, (h, w, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def with_orientation(image: Image.Image, orientation: int, path: Path) -> None:
    exif = Image.Exif()
    exif[0x0112] = orientation
    image.save(path, exif=exif, quality=90)


def write_extra_images() -> list[str]:
    """The extra files (deterministic content); returns their names."""
    EXTRA.mkdir(parents=True, exist_ok=True)
    files = {}
    for i, orientation in enumerate((3, 6, 8)):
        files[f"exif-orientation-{orientation}.jpg"] = lambda p, i=i, o=orientation: with_orientation(
            picture(10 + i, (72, 48)), o, p)
    files["alpha.png"] = lambda p: picture(20, (50, 40)).convert("RGBA").save(p)
    files["grey.png"] = lambda p: picture(21, (40, 60)).convert("L").save(p)
    files["deep-16bit.png"] = lambda p: Image.fromarray(
        (np.asarray(picture(22, (48, 48)).convert("L"), dtype=np.uint16) * 257)).save(p)
    files["palette.gif"] = lambda p: picture(23, (64, 40)).convert("P", palette=Image.Palette.ADAPTIVE).save(p)
    files["photo.webp"] = lambda p: picture(24, (56, 56)).save(p, quality=80)
    files["cmyk.jpg"] = lambda p: picture(25, (60, 45)).convert("CMYK").save(p, quality=90)
    files["photo.bmp"] = lambda p: picture(26, (30, 30)).save(p)
    for name, write in files.items():
        write(EXTRA / name)
    return list(files)


def samples(extra: list[str]) -> list[dict]:
    """[{id, images (relative to the repository)}]: every demo sample, each extra file alone, and
    a sample with several images, one naming an image twice and one without images."""
    out = []
    demo = REPO / "tests" / "assets" / "demo"
    for line in (demo / "demo.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.append({"id": rec["id"], "images": [f"tests/assets/demo/{p}" for p in rec["images"]]})
    rel = [f"tests/assets/dj_fixtures/image_models/{name}" for name in extra]
    out += [{"id": f"extra-{name}", "images": [p]} for name, p in zip(extra, rel)]
    out.append({"id": "several", "images": rel[:4]})
    out.append({"id": "repeated", "images": [rel[0], rel[1], rel[0]]})
    out.append({"id": "no-images", "images": []})
    return out


def run_dj(dj_venv: Path, records: list[dict], work: Path) -> dict:
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({"id": r["id"], "text": "x", "images": [str(REPO / p) for p in r["images"]]})
                            + "\n" for r in records))
    recipe = {"project_name": "image-models-fixture", "dataset_path": str(data),
              "export_path": str(work / "out" / "kept.jsonl"), "np": 1, "skip_op_error": False,
              "op_fusion": False, "use_cache": False, "open_monitor": False, "open_tracer": False,
              "keep_stats_in_res_ds": True, "work_dir": str(work / "work"), "process": OPS}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    subprocess.run([str(dj_venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                   check=True, env={**os.environ, **OFFLINE}, cwd=work)
    rows = [json.loads(line) for line in (work / "out" / "kept.jsonl").read_text().splitlines() if line.strip()]
    if len(rows) != len(records):
        sys.exit(f"Data-Juicer exported {len(rows)} rows for {len(records)} samples: not a usable fixture")
    return {row["id"]: row["__dj__stats__"] for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dj-venv", type=Path, required=True)
    args = parser.parse_args()
    for op in OPS:  # Data-Juicer picks the predictor's head by substrings of its path
        params = next(iter(op.values()))
        if "v1" in str(params.get("hf_scorer_model", "")):
            sys.exit(f"the aesthetics model path must not contain 'v1' (Data-Juicer would take a v1 head): {params}")
    records = samples(write_extra_images())
    with tempfile.TemporaryDirectory() as tmp:
        stats = run_dj(args.dj_venv, records, Path(tmp))
    keys = ("image_aesthetics_scores", "image_nsfw_score", "image_watermark_prob")
    fixture = {"data_juicer": "1.6.1", "ops": OPS,
               "records": [{**r, "stats": {k: stats[r["id"]][k] for k in keys}} for r in records]}
    for op in fixture["ops"]:  # paths relative to the repository, as the test resolves them
        for params in op.values():
            for k, v in params.items():
                if isinstance(v, str) and v.startswith(str(REPO)):
                    params[k] = os.path.relpath(v, REPO)
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}: {len(records)} samples")


if __name__ == "__main__":
    main()
