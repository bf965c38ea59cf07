"""Write the demo multimodal dataset (deterministic).

    python tools/make_demo_data.py [--out tests/assets/demo]

Samples follow a fixed 20-slot pattern repeated 5 times (ids demo-000 .. demo-099):

    slots 0-12   one image, "<__dj__image> <caption> <|__dj__eoc|>"
    slots 13-15  two images of the same thing in one chunk, "<__dj__image> <__dj__image> <caption>"
    slots 16-18  two chunks, "<__dj__image> <caption 1> <|__dj__eoc|> <__dj__image> <caption 2> <|__dj__eoc|>"
    slot  19     very short text, "<__dj__image> red"

Expected drops (also written to expected.json; each listed sample has exactly one defect):

    text_length_filter min_len=30      "short_text", slot 19: 019 039 059 079 099 (short texts are
                                       < 25 chars, all others >= 40, also with <image>/<eoc> tokens)
    image_shape_filter min side 64     "small_image", slot 11: 011 031 051 071 091
    image_aspect_ratio_filter 0.5..2   "extreme_aspect_ratio", slot 12: 012 032 052 072 092
    image-text model filters           20 wrong captions (colour and/or shape):
                                       "wrong_caption" (17): slots 3, 8 (one image), 15 (two images,
                                       neither matches) and 18 of odd blocks (both chunks wrong);
                                       "wrong_caption_some_chunks" (3): slot 18 of even blocks, only
                                       chunk 2 wrong -> dropped only with any_or_all="all"

With the shipped tiny models, per sample (worst chunk; images of a chunk averaged), the CLIP
score logits_per_text / 100 is >= 0.21 for every correct caption and <= 0.17 for every wrong one
(min_score 0.2 separates them), and the BLIP ITM match probability >= 0.85 vs <= 0.03 (use 0.5).
The small images carry correct captions and pass both. The wide images pass CLIP (which centre-crops)
but not all pass BLIP (which squashes an image to a square); the aspect-ratio filter drops them first,
as the text-length filter drops the short texts (whose one-word captions can still pass CLIP).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import synth  # noqa: E402

SLOTS = 20
NORMAL_SIZES = ((96, 96), (96, 96), (128, 96), (96, 128), (112, 112), (128, 128))
SMALL_SIZES = ((40, 40), (48, 32), (56, 56), (32, 48), (60, 40))
WIDE_SIZES = ((200, 64), (64, 200), (240, 80), (192, 64), (80, 240))
README = """\
# Demo dataset

Synthetic image-text samples (a coloured shape on a plain background), written by
`tools/make_demo_data.py`; see its docstring for the exact layout.

- 100 samples in `demo.jsonl` (`id`, `text`, `images` relative to this folder), 130 JPEGs in `images/`.
- 65 single-image, 15 two-images-one-chunk, 15 two-chunk and 5 very-short-text samples.
- 20 samples have a wrong caption (colour and/or shape; 3 of them in their second chunk only),
  5 a small image (< 64 px), 5 an extreme aspect ratio (> 2:1), 5 a text under 25 characters.
- `expected.json` lists, per defect, the ids that the demo filters are expected to drop.
- Tokens: `<__dj__image>` (image placeholder) and `<|__dj__eoc|>` (end of chunk).
- With `tests/assets/models`: CLIP score (logits/100) >= 0.21 for correct and <= 0.17 for wrong
  captions (min_score 0.2); BLIP ITM probability >= 0.85 vs <= 0.03 (min_score 0.5).
"""


def _image(rng: random.Random, attrs, size=None):
    size = size or rng.choice(NORMAL_SIZES)
    return synth.draw(*attrs, size=size, seed=rng.randrange(2**31))


def _sample(i: int, image_token: str, eoc_token: str):
    """Text, images and defect tags of sample ``i``; depends on ``i`` only, never on ``n``."""
    rng = random.Random(f"demo-{i}")
    block, slot = divmod(i, SLOTS)
    attrs = synth.random_attrs(rng)
    right = synth.caption(*attrs)
    wrong = synth.mismatched_caption(rng, attrs)
    if slot <= 12:
        size = SMALL_SIZES[block % 5] if slot == 11 else WIDE_SIZES[block % 5] if slot == 12 else None
        tags = ["small_image"] if slot == 11 else ["extreme_aspect_ratio"] if slot == 12 else []
        if slot in (3, 8):
            tags.append("wrong_caption")
        text = f"{image_token} {wrong if slot in (3, 8) else right} {eoc_token}"
        return text, [_image(rng, attrs, size)], tags
    if slot <= 15:
        text = f"{image_token} {image_token} {wrong if slot == 15 else right}"
        return text, [_image(rng, attrs), _image(rng, attrs)], ["wrong_caption"] if slot == 15 else []
    if slot <= 18:
        attrs2 = synth.random_attrs(rng)
        right2, wrong2 = synth.caption(*attrs2), synth.mismatched_caption(rng, attrs2)
        both_wrong, second_wrong = slot == 18 and block % 2 == 1, slot == 18 and block % 2 == 0
        text = (f"{image_token} {wrong if both_wrong else right} {eoc_token} "
                f"{image_token} {wrong2 if slot == 18 else right2} {eoc_token}")
        tags = ["wrong_caption"] if both_wrong else ["wrong_caption_some_chunks"] if second_wrong else []
        return text, [_image(rng, attrs), _image(rng, attrs2)], tags
    return f"{image_token} {attrs[0]}", [_image(rng, attrs)], ["short_text"]


def write_demo(out_dir, image_token: str = "<__dj__image>", eoc_token: str = "<|__dj__eoc|>", n: int = 100) -> Path:
    """Write ``demo.jsonl``, ``images/`` and ``expected.json`` into ``out_dir``; returns the jsonl path.

    Images and captions are the same for any tokens, so tests can re-write the set with custom ones.
    """
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    expected: dict[str, list[str]] = {}
    with open(out / "demo.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            sid = f"demo-{i:03d}"
            text, images, tags = _sample(i, image_token, eoc_token)
            paths = [f"images/{sid}-{k}.jpg" for k in range(len(images))]
            for img, path in zip(images, paths):
                img.save(out / path, quality=90)
            f.write(json.dumps({"id": sid, "text": text, "images": paths}, ensure_ascii=False) + "\n")
            for tag in tags:
                expected.setdefault(tag, []).append(sid)
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    return out / "demo.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/assets/demo")
    args = parser.parse_args()
    path = write_demo(args.out)
    (Path(args.out) / "README.md").write_text(README)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
