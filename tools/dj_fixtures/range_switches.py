"""Regenerate tests/assets/dj_fixtures/range_switches.json: what Data-Juicer 1.6.1 keeps when a filter's
range switches are set (min_closed_interval, max_closed_interval, reversed_range), on values that sit
exactly on the bounds: a scalar text stat, one value per image joined by any_or_all, and the image
shape filter's two tests per image.

Run with Data-Juicer's interpreter:
    /work/dj-venv/bin/python tools/dj_fixtures/range_switches.py

It draws its images (solid PNGs of the sizes below) into tests/assets/dj_fixtures/range_switches/.
"""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "tests" / "assets" / "dj_fixtures"
IMAGES = ASSETS / "range_switches"

TEXTS = {"len5": "abcde", "len10": "abcdefghij", "len50": "x" * 50, "len100": "y" * 100, "len150": "z" * 150,
         "lines": "a" * 10 + "\n" + "b" * 30}
SIZES = {"w100h100": (100, 100), "w200h100": (200, 100), "w300h150": (300, 150), "w100h300": (100, 300),
         "w400h100": (400, 100), "w50h50": (50, 50)}
SAMPLES = {"one_square": ["w100h100"], "one_wide2": ["w200h100"], "one_tall3": ["w100h300"],
           "wide4_and_square": ["w400h100", "w100h100"], "wide2_and_small": ["w300h150", "w50h50"],
           "tall3_and_wide4": ["w100h300", "w400h100"]}

SWITCHES = [{}, {"min_closed_interval": False}, {"max_closed_interval": False}, {"reversed_range": True},
            {"reversed_range": True, "min_closed_interval": False},
            {"reversed_range": True, "max_closed_interval": False}]
TEXT_CASES = [("text_length_filter", {"min_len": 10, "max_len": 100}),
              ("average_line_length_filter", {"min_len": 10, "max_len": 50})]
IMAGE_CASES = [("image_aspect_ratio_filter", {"min_ratio": 0.5, "max_ratio": 2.0, "any_or_all": "any"}),
               ("image_aspect_ratio_filter", {"min_ratio": 0.5, "max_ratio": 2.0, "any_or_all": "all"}),
               ("image_shape_filter", {"min_width": 100, "max_width": 300, "min_height": 100, "max_height": 150,
                                       "any_or_all": "any"}),
               ("image_shape_filter", {"min_width": 100, "max_width": 300, "min_height": 100, "max_height": 150,
                                       "any_or_all": "all"})]


def draw_images() -> None:
    from PIL import Image
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name, (w, h) in SIZES.items():
        Image.new("RGB", (w, h), (40, 120, 200)).save(IMAGES / f"{name}.png")


def text_rows() -> list[dict]:
    return [{"id": k, "text": v} for k, v in TEXTS.items()]


def image_rows() -> list[dict]:
    return [{"id": k, "text": "<__dj__image> a picture", "images": [str(IMAGES / f"{n}.png") for n in names]}
            for k, names in SAMPLES.items()]


def kept(op_name: str, params: dict, rows: list[dict]) -> list[str]:
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    (op,) = load_ops([{op_name: {**params, "num_proc": 1}}])
    return [s["id"] for s in op.run(NestedDataset.from_list(rows)).to_list()]


def main() -> None:
    draw_images()
    import data_juicer
    cases = []
    for op_cases, rows in ((TEXT_CASES, text_rows()), (IMAGE_CASES, image_rows())):
        for op_name, params in op_cases:
            for switches in SWITCHES:
                cases.append({"op": op_name, "params": {**params, **switches},
                              "kept": kept(op_name, {**params, **switches}, rows)})
    out = {"data_juicer": data_juicer.__version__, "texts": TEXTS, "images": SAMPLES, "cases": cases}
    (ASSETS / "range_switches.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases -> {ASSETS / 'range_switches.json'}")


if __name__ == "__main__":
    main()
