"""Data-Juicer 1.6.1's own numbers for image_face_count_filter, image_face_ratio_filter and
image_subplot_filter, on the images in tests/assets/faces/ (tools/make_face_assets.py).

    python tools/dj_fixtures/faces.py --dj-venv /path/to/dj-venv

Runs `dj-process` offline with skip_op_error: false and op_fusion: false, over each image alone,
samples with several images (one naming an image twice) and one without images:

- `stats` runs: ranges wide open so every sample is kept with its stats (image_subplot_filter with
  min_confidence 1.01, which changes only subplot_detected), once with the defaults and once with
  other detector parameters (another cascade, scaleFactor, minNeighbors, minSize; other Canny,
  Hough and angle settings; any_or_all: all; with strict_preflight: false, since Data-Juicer's
  preflight refuses the detector parameters its face ops take through **kwargs);
- `verdict` runs: each op alone, with its default parameters and with other thresholds and
  any_or_all: all; the ids Data-Juicer keeps.

Writes tests/assets/dj_fixtures/faces.json; tests/test_face_filters.py compares djx with it.
Each run's export must hold one row per sample it keeps and, for the stats runs, every sample.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ASSETS = "tests/assets/faces"
OUT = REPO / "tests" / "assets" / "dj_fixtures" / "faces.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}
OTHER_CASCADE = "haarcascade_frontalface_default.xml"  # from OpenCV's cv2.data.haarcascades
OTHER_DETECTOR = {"scaleFactor": 1.2, "minNeighbors": 2, "minSize": [24, 24]}
STATS_RUNS = {
    "defaults": [{"image_face_count_filter": {"min_face_count": 0, "max_face_count": 1000}},
                 {"image_face_ratio_filter": {"min_ratio": 0.0, "max_ratio": 1.0}},
                 {"image_subplot_filter": {"min_confidence": 1.01}}],
    "other_params": [{"image_face_count_filter": {"cv_classifier": OTHER_CASCADE, "min_face_count": 0,
                                                  "max_face_count": 1000, **OTHER_DETECTOR}},
                     {"image_face_ratio_filter": {"cv_classifier": OTHER_CASCADE, "min_ratio": 0.0,
                                                  "max_ratio": 1.0, "any_or_all": "all", **OTHER_DETECTOR}},
                     {"image_subplot_filter": {"min_confidence": 1.01, "min_horizontal_lines": 2,
                                               "min_vertical_lines": 4, "canny_threshold1": 50,
                                               "canny_threshold2": 150, "hough_threshold": 80,
                                               "min_line_length": 60, "max_line_gap": 10,
                                               "angle_tolerance": 10.0, "any_or_all": "all"}}],
}
VERDICT_RUNS = {
    **{name: [{name: {}}] for name in ("image_face_count_filter", "image_face_ratio_filter", "image_subplot_filter")},
    "image_face_count_filter, all": [{"image_face_count_filter": {"min_face_count": 1, "max_face_count": 3,
                                                                 "any_or_all": "all"}}],
    "image_face_ratio_filter, all": [{"image_face_ratio_filter": {"min_ratio": 0.01, "max_ratio": 0.5,
                                                                 "any_or_all": "all"}}],
    "image_subplot_filter, all": [{"image_subplot_filter": {"min_confidence": 0.54, "any_or_all": "all"}}],
}
KEYS = ("face_counts", "face_ratios", "image_subplot_confidence", "horizontal_peak_count",
        "vertical_peak_count", "subplot_detected")


def samples() -> list[dict]:
    """[{id, images (relative to the repository)}]."""
    names = sorted(p.name for p in (REPO / ASSETS).iterdir() if p.suffix in (".jpg", ".png"))
    one = {n: f"{ASSETS}/{n}" for n in names}
    out = [{"id": Path(n).stem, "images": [one[n]]} for n in names]
    out += [{"id": "astronaut+coffee", "images": [one["astronaut.jpg"], one["coffee.jpg"]]},
            {"id": "faces-mixed", "images": [one["three_faces.jpg"], one["face_closeup.jpg"], one["coffee.jpg"]]},
            {"id": "grid+photo", "images": [one["photo_grid.jpg"], one["astronaut.jpg"]]},
            {"id": "grids", "images": [one["chart_grid.png"], one["two_panels.jpg"]]},
            {"id": "repeated", "images": [one["astronaut.jpg"], one["three_faces.jpg"], one["astronaut.jpg"]]},
            {"id": "no-images", "images": []}]
    return out


def with_cascade(ops: list[dict], dj_venv: Path) -> list[dict]:
    """The ops with OTHER_CASCADE as the absolute path in Data-Juicer's own OpenCV."""
    probe = "import cv2; print(cv2.data.haarcascades)"
    folder = subprocess.run([str(dj_venv / "bin" / "python"), "-c", probe], check=True, capture_output=True,
                            text=True).stdout.strip()
    return [{name: {k: os.path.join(folder, v) if k == "cv_classifier" else v for k, v in params.items()}}
            for op in ops for name, params in op.items()]


def run_dj(dj_venv: Path, records: list[dict], ops: list[dict], work: Path, every_row: bool) -> dict:
    work.mkdir(parents=True)
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({"id": r["id"], "text": "x", "images": [str(REPO / p) for p in r["images"]]})
                            + "\n" for r in records))
    recipe = {"project_name": "faces-fixture", "dataset_path": str(data),
              "export_path": str(work / "out" / "kept.jsonl"), "np": 1, "skip_op_error": False,
              "op_fusion": False, "use_cache": False, "open_monitor": False, "open_tracer": False,
              "keep_stats_in_res_ds": True, "work_dir": str(work / "work"), "process": ops,
              # Data-Juicer's preflight knows only the __init__ parameters; the detector's
              # (scaleFactor, minNeighbors, minSize, maxSize) reach the op through its **kwargs
              "strict_preflight": not any(k in OTHER_DETECTOR for op in ops for p in op.values() for k in p)}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    subprocess.run([str(dj_venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                   check=True, env={**os.environ, **OFFLINE}, cwd=work)
    rows = [json.loads(line) for line in (work / "out" / "kept.jsonl").read_text().splitlines() if line.strip()]
    if every_row and len(rows) != len(records):
        sys.exit(f"Data-Juicer exported {len(rows)} rows for {len(records)} samples: not a usable fixture")
    return {row["id"]: {k: v for k, v in row["__dj__stats__"].items() if k in KEYS} for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dj-venv", type=Path, required=True)
    args = parser.parse_args()
    records = samples()
    fixture = {"data_juicer": "1.6.1", "samples": records, "stats": {}, "verdict": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, ops in STATS_RUNS.items():
            stats = run_dj(args.dj_venv, records, with_cascade(ops, args.dj_venv), Path(tmp) / name, True)
            fixture["stats"][name] = {"ops": ops, "stats": {r["id"]: stats[r["id"]] for r in records}}
        for name, ops in VERDICT_RUNS.items():
            kept = run_dj(args.dj_venv, records, ops, Path(tmp) / name.replace(", ", "-"), False)
            fixture["verdict"][name] = {"ops": ops, "kept": [r["id"] for r in records if r["id"] in kept],
                                        "stats": {r["id"]: kept[r["id"]] for r in records if r["id"] in kept}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}: {len(records)} samples")


if __name__ == "__main__":
    main()
