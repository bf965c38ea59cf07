"""Data-Juicer 1.6.1's own numbers for image_pair_similarity_filter and phrase_grounding_recall_filter.

    python tools/dj_fixtures/pair_grounding.py [--dj-venv /work/dj-venv]

Runs phrase_grounding_recall_filter through `dj-process` (offline, skip_op_error: false,
op_fusion: false, thresholds wide open so every sample is kept with its stats) with the shipped
tiny OWL-ViT and the NLTK data of tests/assets/nltk_data (as NLTK_DATA), over the demo samples
plus texts written here on generated images (tests/assets/dj_fixtures/pair_grounding/: shapes of
several sizes and aspect ratios), twice: with its defaults and with other parameters (min reduce,
flips, tighter IoU and area thresholds, a confidence floor).

image_pair_similarity_filter cannot run through dj-process in 1.6.1: its stat is a torch tensor,
which the dataset layer fails to store (OverflowError), and the preflight refuses any given
min_score or max_score (a float is not its ClosedUnitInterval), 0.0 and 1.0 included. So it is
called through its own compute_stats_single and process_single in Data-Juicer's venv with the
tiny CLIP, on pairs of demo images and of generated ones (a mirrored and a shrunk copy among
them), and on samples that do not hold two distinct images (for which it raises).

Writes tests/assets/dj_fixtures/pair_grounding.json: per run the parameters, and per sample its
text, its image paths (relative to the repository) and Data-Juicer's stats (and, for the pair
filter, its verdict). tests/test_pair_grounding.py compares djx with it.

The NLTK data and OWL-ViT come from tools/make_grounding_test_model.py, CLIP from
tools/make_test_models.py. Data-Juicer's venv needs nltk (its `nlp` extra pins nltk==3.10.3).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from PIL import ImageOps

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tools import synth  # noqa: E402

ASSETS = REPO / "tests" / "assets"
EXTRA = ASSETS / "dj_fixtures" / "pair_grounding"
OUT = ASSETS / "dj_fixtures" / "pair_grounding.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1", "NLTK_DATA": str(ASSETS / "nltk_data")}
IMG, EOC = "<__dj__image>", "<|__dj__eoc|>"
CLIP, OWLVIT = "tests/assets/models/tiny-clip", "tests/assets/models/tiny-owlvit"
PAIR_PARAMS = {"hf_clip": CLIP, "min_score": 0.0, "max_score": 1.0}
GROUNDING_RUNS = [
    {"hf_owlvit": OWLVIT, "min_recall": 0.0, "max_recall": 1.0},
    {"hf_owlvit": OWLVIT, "min_recall": 0.0, "max_recall": 1.0, "reduce_mode": "min", "horizontal_flip": True,
     "vertical_flip": True, "iou_thr": 0.1, "large_area_ratio_thr": 0.3, "conf_thr": 0.45},
]
DEMO = "tests/assets/demo/images/demo-{:03d}-{}.jpg"


def write_generated_images() -> list[str]:
    """Synthetic shapes of assorted sizes (a few KB each), a mirrored and a shrunk copy of one."""
    EXTRA.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    names = []
    for i, size in enumerate([(96, 96), (160, 90), (70, 120), (128, 128), (200, 150), (64, 100)]):
        image, _, _ = synth.random_pair(rng, size=size)
        names.append(f"gen-{i}.png")
        image.save(EXTRA / names[-1])
    base = synth.random_pair(rng, size=(120, 80))[0]
    for name, image in (("base.jpg", base), ("base-mirrored.jpg", ImageOps.mirror(base)),
                        ("base-small.jpg", base.resize((60, 40)))):
        image.save(EXTRA / name, quality=90)
        names.append(name)
    return [str((EXTRA / n).relative_to(REPO)) for n in names]


def pair_records(gen: list[str]) -> list[dict]:
    demo = [DEMO.format(i, 0) for i in range(12)]
    pairs = [(demo[i], demo[i + 1]) for i in range(0, 12, 2)]
    pairs += [(DEMO.format(i, 0), DEMO.format(i, 1)) for i in (13, 14, 15, 16, 17, 18)]
    pairs += [(gen[0], gen[1]), (gen[2], gen[3]), (gen[4], gen[5]), (gen[6], gen[7]), (gen[6], gen[8]),
              (gen[8], gen[0])]
    return [{"id": f"pair-{k}", "text": "", "images": list(p)} for k, p in enumerate(pairs)]


def grounding_records(gen: list[str]) -> list[dict]:
    demo_lines = (ASSETS / "demo" / "demo.jsonl").read_text().splitlines()[:20]
    out = [{**rec, "images": [f"tests/assets/demo/{p}" for p in rec["images"]]}
           for rec in map(json.loads, demo_lines)]
    texts = [
        (f"{IMG} a red circle, a blue square and a green star on a white background.", [gen[0]]),
        (f"{IMG} Two dogs run in the park. A man holds a big blue umbrella!", [gen[1]]),
        (f"{IMG}{IMG}{IMG} the old house has a black door and two windows.", [gen[2], gen[3], gen[4]]),
        (f"{IMG} very bright.", [gen[5]]),
        (f"{IMG} very bright. {EOC} {IMG} a small yellow triangle sits on top of a large purple square {EOC}",
         [gen[6], gen[7]]),
        (f"{IMG} a woman is riding a bicycle near the river {EOC} {IMG} {IMG} children play with red balls "
         f"in a park {EOC}", [gen[8], gen[0], gen[1]]),
        ("a red circle on a white background, no picture", []),
        (f"{IMG} THE ORANGE TRIANGLES AND BLUE CIRCLES ON A BLACK BACKGROUND", [gen[4]]),
        (f"{IMG} an image of a white circle on a gray background; the cat sleeps under a red car (really)",
         [gen[3]]),
    ]
    out += [{"id": f"text-{k}", "text": t, "images": imgs} for k, (t, imgs) in enumerate(texts)]
    return out


def run_dj(dj_venv: Path, op: dict, records: list[dict], work: Path) -> dict:
    work.mkdir(parents=True)
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({**r, "images": [str(REPO / p) for p in r["images"]]}) + "\n"
                            for r in records))
    (name, params), = op.items()
    params = {k: str(REPO / v) if k.startswith("hf_") else v for k, v in params.items()}
    recipe = {"project_name": "pair-grounding-fixture", "dataset_path": str(data),
              "export_path": str(work / "out" / "kept.jsonl"), "np": 1, "skip_op_error": False,
              "op_fusion": False, "use_cache": False, "open_monitor": False, "open_tracer": False,
              "keep_stats_in_res_ds": True, "work_dir": str(work / "work"), "process": [{name: params}]}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    subprocess.run([str(dj_venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                   check=True, env={**os.environ, **OFFLINE}, cwd=work)
    rows = [json.loads(line) for line in (work / "out" / "kept.jsonl").read_text().splitlines() if line.strip()]
    if len(rows) != len(records):
        sys.exit(f"Data-Juicer exported {len(rows)} rows for {len(records)} samples: not a usable fixture")
    return {row["id"]: row["__dj__stats__"] for row in rows}


PAIR_SCRIPT = """
import json, sys
from data_juicer.ops.filter.image_pair_similarity_filter import ImagePairSimilarityFilter
op = ImagePairSimilarityFilter(hf_clip=sys.argv[1], min_score=0.0, max_score=1.0)
out = []
for images in json.loads(sys.argv[2]):
    sample = {"text": "", "images": images, "__dj__stats__": {}}
    try:
        stats = op.compute_stats_single(sample)["__dj__stats__"]
        out.append({"stats": {k: v.tolist() for k, v in stats.items()}, "keep": bool(op.process_single(sample))})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
print(json.dumps(out))
"""


def run_pair_op(dj_venv: Path, cases: list[list[str]]) -> list[dict]:
    """Data-Juicer's image_pair_similarity_filter on each list of images, called in Data-Juicer's
    venv: its stats (or the error it raises) and its verdict. dj-process cannot run this op in
    1.6.1: the stat is a torch tensor, which the dataset layer fails to store (OverflowError)."""
    absolute = [[str(REPO / p) for p in c] for c in cases]
    proc = subprocess.run([str(dj_venv / "bin" / "python"), "-c", PAIR_SCRIPT, str(REPO / CLIP),
                           json.dumps(absolute)], check=True, capture_output=True, text=True,
                          env={**os.environ, **OFFLINE})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dj-venv", type=Path, default=Path("/work/dj-venv"))
    args = parser.parse_args()
    gen = write_generated_images()
    pairs, texts = pair_records(gen), grounding_records(gen)
    found = run_pair_op(args.dj_venv, [r["images"] for r in pairs])
    if any("error" in f for f in found):
        sys.exit(f"Data-Juicer failed on a pair: {found}")
    fixture = {"data_juicer": "1.6.1", "runs": [{"op": "image_pair_similarity_filter", "params": PAIR_PARAMS,
                                                 "records": [{**r, **f} for r, f in zip(pairs, found)]}]}
    errors = [[], [gen[0]], [gen[0], gen[1], gen[2]], [gen[0], gen[0]]]
    fixture["pair_errors"] = [{"images": c, **f} for c, f in zip(errors, run_pair_op(args.dj_venv, errors))]
    with tempfile.TemporaryDirectory() as tmp:
        for k, params in enumerate(GROUNDING_RUNS):
            name = "phrase_grounding_recall_filter"
            stats = run_dj(args.dj_venv, {name: params}, texts, Path(tmp) / f"run-{k}")
            fixture["runs"].append({"op": name, "params": params, "records": [
                {**r, "stats": stats[r["id"]]} for r in texts]})
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}: " + ", ".join(f"{r['op']} {len(r['records'])}" for r in fixture["runs"]))


if __name__ == "__main__":
    main()
