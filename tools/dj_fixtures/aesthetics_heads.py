"""Checkpoints written by the simple-aesthetics-predictor package itself (the classes Data-Juicer
loads shunk031's models with), for the heads the tiny test model does not cover, and the package's
own scores on four demo images.

    python tools/dj_fixtures/aesthetics_heads.py --dj-venv /path/to/dj-venv

Writes tests/assets/models/pkg-aesthetics-{v1,v2-relu}/ (tiny CLIP vision config, random weights
fixed by the seed, saved with the package class's save_pretrained) and
tests/assets/dj_fixtures/aesthetics_heads.json ({folder: [raw logit per image]}). The test loads
each folder through djx's own predictor classes and compares.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "assets" / "dj_fixtures" / "aesthetics_heads.json"

SCRIPT = """
import json, sys, torch
from pathlib import Path
from PIL import Image
from transformers import CLIPImageProcessor, CLIPVisionConfig
from aesthetics_predictor import AestheticsPredictorV1, AestheticsPredictorV2ReLU
repo = Path(sys.argv[1])
images = sorted((repo / "tests/assets/demo/images").glob("*.jpg"))[:4]
pixels_of = [Image.open(p).convert("RGB") for p in images]
config = CLIPVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, projection_dim=16)
processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
out = {"images": [str(p.relative_to(repo)) for p in images], "scores": {}}
for seed, (name, cls) in enumerate((("pkg-aesthetics-v1", AestheticsPredictorV1),
                                    ("pkg-aesthetics-v2-relu", AestheticsPredictorV2ReLU))):
    torch.manual_seed(seed)
    model = cls(config).eval()
    for p in model.parameters():  # spread the outputs (the default init gives ~0)
        p.data.normal_(0.0, 0.3)
    folder = repo / "tests/assets/models" / name
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    with torch.no_grad():
        logits = model(**processor(images=pixels_of, return_tensors="pt")).logits[:, 0]
    out["scores"][str(folder.relative_to(repo))] = logits.tolist()
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dj-venv", type=Path, required=True)
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    res = subprocess.run([str(args.dj_venv / "bin" / "python"), "-c", SCRIPT, str(REPO)], env=env, check=True,
                         capture_output=True, text=True)
    OUT.write_text(json.dumps(json.loads(res.stdout.strip().splitlines()[-1]), indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
