"""Data-Juicer 1.6.1's own numbers for image_text_similarity_filter and image_text_matching_filter on
image files as cameras, editors and web crawls write them, with the shipped tiny CLIP and BLIP.

    python tools/dj_fixtures/image_text_models.py --dj-venv /path/to/dj-venv

Writes the images (deterministic content) into tests/assets/dj_fixtures/image_text_models/: PNG
and GIF naming a transparent colour (tRNS: RGB and palette), a PNG whose EXIF orientation comes
after its pixel data, an EXIF-rotated JPEG, CMYK JPEG, RGBA with a gradient alpha, 16-bit grey,
an animated GIF; then computes each filter's stat per sample in Data-Juicer's venv, through the
ops' own compute_stats_single (their min_score is a unit interval, so a dj-process run would drop
the tiny models' negative scores before they could be read), each image alone and two of them as
two chunks. Writes tests/assets/dj_fixtures/image_text_models.json: per sample its text, its image
paths (relative to the repository) and Data-Juicer's stats. tests/test_dj_image_text_models.py
compares djx with it.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "assets" / "models"
FOLDER = REPO / "tests" / "assets" / "dj_fixtures" / "image_text_models"
OUT = REPO / "tests" / "assets" / "dj_fixtures" / "image_text_models.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
TEXT = "a red square on a black background"

# run in Data-Juicer's venv: argv[1] the samples (JSON), argv[2] the models' folder; prints the stats
DJ_SIDE = """
import json, sys
import torch
torch.set_num_threads(1)
from data_juicer.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
from data_juicer.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
from data_juicer.utils.constant import Fields
models = sys.argv[2]
ops = [ImageTextSimilarityFilter(hf_clip=models + "/tiny-clip", min_score=0.0, max_score=1.0),
       ImageTextMatchingFilter(hf_blip=models + "/tiny-blip-itm", min_score=0.0, max_score=1.0)]
out = []
for sample in json.load(open(sys.argv[1])):
    stats = {}
    for op in ops:
        s = {"text": sample["text"], "images": sample["images"], Fields.stats: {}}
        s = op.compute_stats_single(s)
        stats.update({k: [float(x) for x in v] for k, v in s[Fields.stats].items()})
    out.append(stats)
print(json.dumps(out))
"""


def picture(seed: int, size: tuple[int, int]) -> Image.Image:
    """A red square on a black field with smooth colour and noise around it: a model's score moves
    when the black turns white."""
    rng = np.random.default_rng(seed)
    w, h = size
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    field = np.stack([np.sin(x * rng.uniform(2, 6)) * 40 + 40, np.cos(y * rng.uniform(2, 6)) * 30 + 30,
                      x * 50], axis=-1) + rng.normal(0, 6, (h, w, 3))
    pixels = np.clip(field, 0, 255).astype(np.uint8)
    pixels[h // 4:3 * h // 4, w // 4:3 * w // 4] = (230, 20, 20)
    pixels[:h // 6, :] = 0  # a band of pure black: the transparent colour below
    return Image.fromarray(pixels, "RGB")


def exif_after_data(path: Path, image: Image.Image, orientation: int) -> None:
    """A PNG whose eXIf chunk follows its pixel data (older writers put it there)."""
    image.save(path)
    exif = Image.Exif()
    exif[0x0112] = orientation
    body = exif.tobytes()
    chunk = struct.pack(">I", len(body)) + b"eXIf" + body + struct.pack(">I", zlib.crc32(b"eXIf" + body))
    data = path.read_bytes()
    end = data.rindex(b"IEND") - 4
    path.write_bytes(data[:end] + chunk + data[end:])


def write_images() -> list[str]:
    FOLDER.mkdir(parents=True, exist_ok=True)
    base = picture(1, (96, 64))
    palette = base.convert("P", palette=Image.Palette.ADAPTIVE, colors=32)
    black = palette.getpixel((0, 0))  # the band's index
    exif = Image.Exif()
    exif[0x0112] = 6
    rgba = base.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(base.size))
    frames = [picture(s, (96, 64)) for s in (2, 3)]
    files = {
        "trns-rgb.png": lambda p: base.save(p, transparency=(0, 0, 0)),
        "trns-palette.png": lambda p: palette.save(p, transparency=black),
        "trns.gif": lambda p: palette.save(p, transparency=black),
        "exif-after-data-6.png": lambda p: exif_after_data(p, base.transpose(Image.Transpose.ROTATE_90), 6),
        "orientation-6.jpg": lambda p: base.transpose(Image.Transpose.ROTATE_90).save(p, exif=exif, quality=92),
        "cmyk.jpg": lambda p: base.convert("CMYK").save(p, quality=92),
        "rgba.png": lambda p: rgba.save(p),
        "grey-16bit.png": lambda p: Image.fromarray(np.asarray(base.convert("L"), dtype=np.uint16) * 257).save(p),
        "animated.gif": lambda p: frames[0].save(p, save_all=True, append_images=frames[1:], duration=50),
        "plain.png": lambda p: base.save(p),
    }
    for name, write in files.items():
        write(FOLDER / name)
    return list(files)


def samples(names: list[str]) -> list[dict]:
    rel = [f"tests/assets/dj_fixtures/image_text_models/{n}" for n in names]
    out = [{"id": n, "text": f"<__dj__image> {TEXT} <|__dj__eoc|>", "images": [p]} for n, p in zip(names, rel)]
    out.append({"id": "two-chunks", "text": f"<__dj__image> {TEXT} <|__dj__eoc|> <__dj__image> a grey photo <|__dj__eoc|>",
                "images": [rel[0], rel[3]]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dj-venv", type=Path, required=True)
    args = ap.parse_args()
    records = samples(write_images())
    given = [{"text": r["text"], "images": [str(REPO / p) for p in r["images"]]} for r in records]
    tmp = OUT.with_suffix(".samples.json")
    tmp.write_text(json.dumps(given))
    try:
        done = subprocess.run([str(args.dj_venv / "bin" / "python"), "-c", DJ_SIDE, str(tmp), str(MODELS)],
                              check=True, capture_output=True, text=True, env={**os.environ, **OFFLINE})
    finally:
        tmp.unlink()
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    if len(stats) != len(records):
        sys.exit(f"Data-Juicer gave {len(stats)} results for {len(records)} samples: not a usable fixture")
    fixture = {"data_juicer": "1.6.1", "records": [{**r, "stats": s} for r, s in zip(records, stats)]}
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}: {len(records)} samples")


if __name__ == "__main__":
    main()
