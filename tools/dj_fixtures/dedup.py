"""Regenerate tests/assets/dj_fixtures/dedup/ and dedup.json: Data-Juicer 1.6.1's own hashes and
kept samples for its deduplicators, over texts and photo-like images made here.

Run with Data-Juicer's interpreter, imagededup's torchvision stand-in on the path (see
../shared/anchors/README.md), and `sentencepiece` in that venv:
    PYTHONPATH=/work/shared/anchors/stubs HF_HUB_OFFLINE=1 /work/dj-venv/bin/python tools/dj_fixtures/dedup.py

The texts: exact copies, copies differing in case, whitespace, digits or punctuation, near copies
(a word or two changed in a long text, at several distances), CJK texts, texts shorter than a
shingle window, an empty text. The images: smooth photo-like JPEGs and their copies re-encoded,
resized, stored sideways with an EXIF orientation, recompressed hard, saved as PNG, cropped; samples
with one image, several, the same path twice, none. Each case runs the op through Data-Juicer's
Deduplicator.run (skip_op_error off): once without reducing (its hash of every sample) and once
reducing (the samples it keeps). Three whole recipes (deduplicators among filters, one after
another) run their ops one after the other, as Data-Juicer's executor does: the samples they keep.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "tests" / "assets" / "dj_fixtures"
IMAGES = ASSETS / "dedup"
SP_MODEL = ASSETS / "text_resources" / "en.sp.model"

TEXT_CASES = [
    ("document_deduplicator", {}),
    ("document_deduplicator", {"lowercase": True}),
    ("document_deduplicator", {"ignore_non_character": True}),
    ("document_deduplicator", {"lowercase": True, "ignore_non_character": True}),
    ("document_minhash_deduplicator", {}),
    ("document_minhash_deduplicator", {"jaccard_threshold": 0.5}),
    ("document_minhash_deduplicator", {"jaccard_threshold": 0.8}),
    ("document_minhash_deduplicator", {"jaccard_threshold": 0.9, "window_size": 3}),
    ("document_minhash_deduplicator", {"jaccard_threshold": 0.3, "window_size": 2, "lowercase": False}),
    ("document_minhash_deduplicator", {"num_permutations": 128, "num_bands": 16, "num_rows_per_band": 8}),
    ("document_minhash_deduplicator", {"tokenization": "character", "window_size": 4, "jaccard_threshold": 0.6}),
    ("document_minhash_deduplicator", {"tokenization": "punctuation", "window_size": 2, "jaccard_threshold": 0.5}),
    ("document_minhash_deduplicator", {"ignore_pattern": "\\p{P}", "jaccard_threshold": 0.6}),
    ("document_minhash_deduplicator", {"tokenization": "sentencepiece", "tokenizer_model": "@sp_model",
                                       "jaccard_threshold": 0.6}),
    ("document_simhash_deduplicator", {}),
    ("document_simhash_deduplicator", {"hamming_distance": 8, "num_blocks": 10, "window_size": 3}),
    ("document_simhash_deduplicator", {"hamming_distance": 1, "num_blocks": 4}),
    ("document_simhash_deduplicator", {"tokenization": "character", "window_size": 3, "hamming_distance": 6,
                                       "num_blocks": 8}),
    ("document_simhash_deduplicator", {"tokenization": "punctuation", "window_size": 2}),
]
IMAGE_CASES = [("image_deduplicator", {"method": m, "consider_text": t})
               for m in ("phash", "dhash", "whash", "ahash") for t in (False, True)]
# whole recipes (Data-Juicer runs its ops one after the other, as its executor does): deduplicators
# after filters, before filters that drop the first of a group, one after another
RECIPES = [
    ("texts", [("text_length_filter", {"min_len": 5}), ("document_simhash_deduplicator", {"hamming_distance": 6,
                                                                                          "num_blocks": 8}),
               ("document_minhash_deduplicator", {"jaccard_threshold": 0.5}),
               ("text_length_filter", {"max_len": 412}), ("document_deduplicator", {"lowercase": True})]),
    ("texts", [("document_deduplicator", {"ignore_non_character": True}), ("words_num_filter", {"min_num": 3}),
               ("document_minhash_deduplicator", {"tokenization": "character", "window_size": 3,
                                                  "jaccard_threshold": 0.4})]),
    ("images", [("image_deduplicator", {"method": "dhash"}), ("text_length_filter", {"min_len": 8}),
                ("image_deduplicator", {"method": "whash", "consider_text": True}), ("document_deduplicator", {})]),
]
HASH_KEYS = {"document_deduplicator": ["__dj__hash"], "document_simhash_deduplicator": ["__dj__simhash"],
             "document_minhash_deduplicator": [], "image_deduplicator": ["__dj__imagehash", "__dj__hash"]}

WORDS = ("river stone light cloud harbor quiet market winter garden copper signal paper orbit meadow lantern "
         "thunder velvet canyon mirror ember falcon glacier hollow island jasmine kettle linen marble needle "
         "oyster pepper quartz saddle timber umbra violet willow yonder zephyr anchor basket candle desert").split()


def texts() -> list[str]:
    rng = random.Random(7)
    long = [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(4)]

    def changed(text: str, n: int, seed: int) -> str:
        r, words = random.Random(seed), text.split(" ")
        for i in r.sample(range(len(words)), n):
            words[i] = r.choice(WORDS).upper() if n % 2 else "novel" + str(i)
        return " ".join(words)

    out = [long[0], long[0], long[0].upper(), long[0].replace(" ", "  "), long[0] + " 2024!", long[0] + ".",
           changed(long[0], 1, 1), changed(long[0], 3, 2), changed(long[0], 8, 3), changed(long[0], 20, 4),
           long[1], changed(long[1], 2, 5), changed(long[1], 5, 6), " ".join(reversed(long[1].split(" "))),
           long[2], long[2].replace(" ", ", "), changed(long[2].replace(" ", ", "), 4, 7), long[3],
           "The quick brown fox, jumps over the lazy dog; again and again, and again.",
           "the quick brown fox jumps over the lazy dog again and again and again",
           "数据清洗是训练大模型之前最重要的一步，重复的数据会浪费算力。",
           "数据清洗是训练大模型之前最重要的一步，重复的数据会浪费很多算力。",
           "今天天气很好，我们去公园散步吧。", "short one", "short two", "", "   ", "a b", "A B!",
           "Hello\tworld\nagain", "hello world again"]
    return out


def photo(seed: int, size: tuple[int, int]) -> Image.Image:
    """A smooth, photo-like picture: gradients, blurred noise, a few soft shapes."""
    rng = np.random.default_rng(seed)
    w, h = size
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    base = np.stack([rng.uniform(40, 200) + rng.uniform(-80, 80) * x + rng.uniform(-60, 60) * y for _ in range(3)], -1)
    noise = np.asarray(Image.fromarray(rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8))
                       .resize((w, h), Image.BICUBIC), dtype=np.float64)
    img = Image.fromarray(np.clip(base * 0.7 + noise * 0.3, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(w / 10, w / 3)
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    return img.filter(ImageFilter.GaussianBlur(2))


def make_images() -> dict[str, str]:
    """The image files (name -> path relative to ASSETS)."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    files = {}

    def save(name: str, img: Image.Image, **kw) -> None:
        img.save(IMAGES / name, **kw)
        files[name] = f"dedup/{name}"

    bases = [photo(s, size) for s, size in enumerate([(160, 120), (128, 128), (120, 160), (144, 96), (150, 100)])]
    for i, img in enumerate(bases):
        save(f"p{i}.jpg", img, quality=92)
    reread = lambda i: Image.open(IMAGES / f"p{i}.jpg").convert("RGB")  # noqa: E731
    save("p0_q60.jpg", reread(0), quality=60)
    save("p0.png", reread(0))
    save("p1_half.jpg", reread(1).resize((64, 64), Image.LANCZOS), quality=90)
    save("p1_q25.jpg", reread(1), quality=25)
    exif = Image.Exif()
    exif[0x0112] = 6  # stored turned a quarter left: a viewer turns it right to show it upright
    save("p2_exif6.jpg", reread(2).transpose(Image.ROTATE_90), quality=92, exif=exif)
    save("p3_crop.jpg", reread(3).crop((14, 10, 144, 96)), quality=92)
    save("p4_q10.jpg", reread(4), quality=10)
    save("p4_bright.jpg", Image.eval(reread(4), lambda v: min(255, v + 40)), quality=92)
    return files


def image_rows(files: dict[str, str]) -> list[dict]:
    samples = [
        (["p0.jpg"], "a photo"), (["p0_q60.jpg"], "a photo"), (["p0.png"], "another caption"),
        (["p1.jpg"], "a photo"), (["p1_half.jpg"], "a photo"), (["p1_q25.jpg"], "a photo"),
        (["p2_exif6.jpg"], "a photo"), (["p2.jpg"], "a photo"),
        (["p3.jpg"], "a photo"), (["p3_crop.jpg"], "a photo"),
        (["p4.jpg"], "a photo"), (["p4_q10.jpg"], "a photo"), (["p4_bright.jpg"], "a photo"),
        ([], "no image"), ([], "no image"), ([], "no image either"),
        (["p0.jpg", "p1.jpg"], "two photos"), (["p0_q60.jpg", "p1_q25.jpg"], "two photos"),
        (["p1.jpg", "p0.jpg"], "two photos"), (["p0.jpg", "p0.jpg"], "a photo"),
        (["p0.jpg", "p1.jpg", "p2_exif6.jpg"], "three photos"), (["p0.png", "p1_half.jpg", "p2.jpg"], "three photos"),
    ]
    return [{"id": i, "text": text, "images": [files[n] for n in names]} for i, (names, text) in enumerate(samples)]


def run_case(op_name: str, params: dict, rows: list[dict]) -> dict:
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    dj_params = {k: str(SP_MODEL) if v == "@sp_model" else v for k, v in params.items()}
    (op,) = load_ops([{op_name: {**dj_params, "num_proc": 1, "skip_op_error": False}}])
    hashed = op.run(NestedDataset.from_list(rows), reduce=False).to_list()
    kept = op.run(NestedDataset.from_list(rows)).to_list()
    assert len(hashed) == len(rows), (op_name, params)
    keys = [k for k in HASH_KEYS[op_name] if k in hashed[0]]
    out = {"op": op_name, "params": params, "kept": [s["id"] for s in kept],
           "hashes": {k: [s[k] for s in hashed] for k in keys}}
    if op_name == "document_minhash_deduplicator":
        out["bands"] = [op.num_bands, op.num_rows_per_band]
    return out


def run_recipe(process: list, rows: list[dict]) -> tuple[list[int], list[int]]:
    """The ids Data-Juicer keeps, and how many samples pass each op."""
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    dataset, passing = NestedDataset.from_list(rows), []
    for op in load_ops([{name: {**params, "num_proc": 1, "skip_op_error": False}} for name, params in process]):
        dataset = op.run(dataset)
        passing.append(len(dataset))
    return [s["id"] for s in dataset.to_list()], passing


def main() -> None:
    import os
    import data_juicer
    files = make_images()
    text_rows = [{"id": i, "text": t} for i, t in enumerate(texts())]
    (ASSETS / "dedup_texts.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in text_rows),
                                              encoding="utf-8")
    rows = image_rows(files)
    os.chdir(ASSETS)  # the image paths are relative to the fixtures folder
    absolute = [{**r, "images": [str(ASSETS / p) for p in r["images"]]} for r in rows]
    cases = [run_case(op, params, text_rows) for op, params in TEXT_CASES]
    for op, params in IMAGE_CASES:
        case = run_case(op, params, absolute)
        cases.append(case)
    recipes = []
    for kind, process in RECIPES:
        kept, passing = run_recipe(process, text_rows if kind == "texts" else absolute)
        recipes.append({"rows": kind, "process": [{name: params} for name, params in process], "kept": kept,
                        "passing": passing})
    (ASSETS / "dedup_images.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    head = {"data_juicer": data_juicer.__version__, "texts": "dedup_texts.jsonl", "images": "dedup_images.jsonl"}
    body = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)  # one case a line
    whole = ",\n".join(json.dumps(r, ensure_ascii=False) for r in recipes)
    (ASSETS / "dedup.json").write_text(json.dumps(head)[:-1] + ', "cases": [\n' + body + '\n], "recipes": [\n'
                                       + whole + "\n]}\n", encoding="utf-8")
    for c in cases:
        print(f"{c['op']} {c['params']}: keeps {len(c['kept'])} of {len(text_rows if 'image' not in c['op'] else rows)}")


if __name__ == "__main__":
    main()
