"""The face and subplot filters (image_face_count_filter, image_face_ratio_filter,
image_subplot_filter): Data-Juicer 1.6.1's numbers and verdicts on real photos
(tests/assets/dj_fixtures/faces.json, written by tools/dj_fixtures/faces.py), exact face counts, the
any/all strategies, drop reasons, bad images rejected with their reason, and a missing cascade or
OpenCV refused at load. They need OpenCV 4 (the vision extra; the test extra installs it).
Those that detect faces or lines in photos are `slow`: seconds each on a shared CPU."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw

from djx import STATS_KEY, Pipeline, RecipeError, build_op
from djx.core.op.reasons import default_reason
from helpers import REPO_DIR, read_jsonl_file, write_jsonl_file

cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (pip install -e '.[test]' installs it)")

from djx.ops.filter.image_face_count_filter import ImageFaceCountFilter  # noqa: E402
from djx.ops.filter.image_face_ratio_filter import ImageFaceRatioFilter  # noqa: E402
from djx.ops.filter.image_subplot_filter import ImageSubplotFilter  # noqa: E402

ASSETS = REPO_DIR / "tests" / "assets" / "faces"
FIXTURE = json.loads((REPO_DIR / "tests" / "assets" / "dj_fixtures" / "faces.json").read_text())
TOLERANCE = 1e-5
COUNTS = ("face_counts", "horizontal_peak_count", "vertical_peak_count", "subplot_detected")


def asset(name: str) -> str:
    return str(ASSETS / name)


def build(ops: list[dict]) -> list:
    """The fixture's ops in djx, a cascade named by file taken from this OpenCV's cascades."""
    out = []
    for op in ops:
        ((name, params),) = op.items()
        params = dict(params)
        if params.get("cv_classifier"):
            params["cv_classifier"] = os.path.join(cv2.data.haarcascades, params["cv_classifier"])
        out.append(build_op(name, params))
    return out


def fixture_samples() -> list[dict]:
    return [{"id": s["id"], "text": "x", "images": [str(REPO_DIR / p) for p in s["images"]]}
            for s in FIXTURE["samples"]]


def run(ops, samples: list[dict]) -> tuple[list[dict], Pipeline]:
    pipe = Pipeline(ops=list(ops), batch_size=max(len(samples), 1))
    return list(pipe.process([dict(s) for s in samples])), pipe


def stats_of(op, images: list[str]) -> dict:
    """The stats `op` writes for a sample of these images (made with its ranges wide open, so the
    sample is kept with them; image_subplot_filter's subplot_detected is then False)."""
    wide = type(op)(**{**op.params(), **WIDE[op.name]})
    (out,), _ = run([wide], [{"text": "", "images": images}])
    return out[STATS_KEY]


WIDE = {"image_face_count_filter": {"min_face_count": 0, "max_face_count": 1000},
        "image_face_ratio_filter": {"min_ratio": 0.0, "max_ratio": 1.0},
        "image_subplot_filter": {"min_confidence": 1.01}}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIXTURE["stats"]))
def test_stats_are_data_juicers(name):
    """Every stat of every sample as Data-Juicer computed it: counts exact, ratios and confidences
    within 1e-5; with the default detectors and with other ones (another cascade file,
    scaleFactor, minNeighbors, minSize; other Canny, Hough and angle settings)."""
    expected = FIXTURE["stats"][name]["stats"]
    kept, _ = run(build(FIXTURE["stats"][name]["ops"]), fixture_samples())
    assert [s["id"] for s in kept] == list(expected)
    for sample in kept:
        got, want = sample[STATS_KEY], expected[sample["id"]]
        for key, value in want.items():
            where = f"{sample['id']}.{key}"
            if key in COUNTS:
                assert got[key] == value, where
            else:
                assert got[key] == pytest.approx(value, abs=TOLERANCE), where


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIXTURE["verdict"]))
def test_the_samples_kept_are_data_juicers(name):
    """With the default parameters, and with other thresholds and any_or_all: all."""
    verdict = FIXTURE["verdict"][name]
    kept, _ = run(build(verdict["ops"]), fixture_samples())
    assert [s["id"] for s in kept] == verdict["kept"]
    for sample in kept:
        for key, value in verdict["stats"][sample["id"]].items():
            assert sample[STATS_KEY][key] == pytest.approx(value, abs=TOLERANCE), f"{sample['id']}.{key}"


@pytest.mark.slow
def test_face_counts_and_ratios_of_the_test_photos():
    """What the photos hold: one face, none, three side by side, a close-up, a small face; a photo
    stored sideways with an EXIF orientation is decoded upright, so its face is found."""
    names = ["astronaut.jpg", "coffee.jpg", "three_faces.jpg", "face_closeup.jpg", "face_on_coffee.jpg",
             "astronaut_exif6.jpg"]
    stats = stats_of(ImageFaceCountFilter(), [asset(n) for n in names])
    assert stats["face_counts"] == [1, 0, 3, 1, 1, 1]
    ratios = stats_of(ImageFaceRatioFilter(), [asset(n) for n in names])["face_ratios"]
    assert ratios[1] == 0.0 and ratios[3] > 0.4 and ratios[4] < 0.02
    w, h = Image.open(asset("face_closeup.jpg")).size
    boxes = cv2.CascadeClassifier(os.path.join(cv2.data.haarcascades, "haarcascade_frontalface_alt.xml"))
    grey = cv2.cvtColor(np.asarray(Image.open(asset("face_closeup.jpg")).convert("RGB")), cv2.COLOR_RGB2GRAY)
    (x, y, fw, fh), = boxes.detectMultiScale(grey, scaleFactor=1.1, minNeighbors=3)
    assert ratios[3] == pytest.approx(fw * fh / (w * h))  # the largest face's area over the image's


@pytest.mark.slow
def test_face_filters_keep_by_any_or_all():
    one, three, none = asset("astronaut.jpg"), asset("three_faces.jpg"), asset("coffee.jpg")
    samples = [{"text": "", "images": imgs} for imgs in ([one], [three], [one, three], [none, none], [])]
    for any_or_all, expected in (("any", [0, 2, 4]), ("all", [0, 4])):
        kept, _ = run([ImageFaceCountFilter(any_or_all=any_or_all)], [dict(s, i=i) for i, s in enumerate(samples)])
        assert [s["i"] for s in kept] == expected, any_or_all
    closeup = asset("face_closeup.jpg")
    samples = [{"text": "", "images": imgs, "i": i} for i, imgs in enumerate(([one], [closeup], [one, closeup]))]
    assert [s["i"] for s in run([ImageFaceRatioFilter()], samples)[0]] == [0, 2]
    assert [s["i"] for s in run([ImageFaceRatioFilter(any_or_all="all")], samples)[0]] == [0]


@pytest.mark.slow
def test_a_sample_without_images_is_kept_with_empty_stats():
    kept, _ = run([ImageFaceCountFilter(), ImageFaceRatioFilter(), ImageSubplotFilter()],
                  [{"text": "no pictures", "images": []}])
    assert kept[0][STATS_KEY] == {"face_counts": [], "face_ratios": [], "image_subplot_confidence": [],
                                  "horizontal_peak_count": [], "vertical_peak_count": [],
                                  "subplot_detected": False}


@pytest.mark.slow
def test_drop_reasons_name_the_stat_its_value_and_the_bound():
    count = ImageFaceCountFilter()
    reason = default_reason(count, stats_of(count, [asset("three_faces.jpg")]))
    assert reason == "face_counts=[3] above max_face_count 1"
    assert default_reason(count, stats_of(count, [asset("coffee.jpg")])) == "face_counts=[0] below min_face_count 1"
    ratio = ImageFaceRatioFilter()
    stats = stats_of(ratio, [asset("face_closeup.jpg")])
    assert default_reason(ratio, stats) == f"face_ratios=[{stats['face_ratios'][0]:.4g}] above max_ratio 0.4"
    subplot = ImageSubplotFilter()
    stats = stats_of(subplot, [asset("chart_grid.png"), asset("coffee.jpg")])
    c, h, v = (stats[k][0] for k in ("image_subplot_confidence", "horizontal_peak_count", "vertical_peak_count"))
    assert default_reason(subplot, stats) == (
        f"subplots in 1 of 2 image(s) (any_or_all: any): image 1: image_subplot_confidence={c:.4g} >= "
        f"min_confidence 0.5, horizontal_peak_count={h} >= min_horizontal_lines 3, vertical_peak_count={v} >= "
        f"min_vertical_lines 3")


def panels(path, rows: int, columns: int, size=(600, 450)) -> str:
    """A figure of rows x columns framed panels, each with a curve in it."""
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    pw, ph = (size[0] - 20) // columns, (size[1] - 20) // rows
    for r in range(rows):
        for c in range(columns):
            x, y = 10 + c * pw, 10 + r * ph
            draw.rectangle((x + 5, y + 5, x + pw - 5, y + ph - 5), outline="black", width=2)
            draw.line([(x + 10 + k * 6, y + ph // 2 + ((k * 7) % 23) - 11) for k in range((pw - 20) // 6)],
                      fill="blue", width=2)
    img.save(path)
    return str(path)


def ruled_page(path, size=(600, 450)) -> str:
    """Only horizontal lines: no panels."""
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    for y in range(30, size[1], 40):
        draw.line([(20, y), (size[0] - 20, y)], fill="black", width=2)
    img.save(path)
    return str(path)


@pytest.mark.slow
def test_subplot_filter_drops_grids_of_panels_and_keeps_photos(tmp_path):
    grids = [panels(tmp_path / "g22.png", 2, 2), panels(tmp_path / "g23.png", 2, 3),
             panels(tmp_path / "g33.png", 3, 3)]
    singles = [asset("coffee.jpg"), asset("astronaut.jpg"), ruled_page(tmp_path / "ruled.png")]
    samples = [{"text": "", "images": [p], "i": i} for i, p in enumerate(grids + singles)]
    kept, _ = run([ImageSubplotFilter()], samples)
    assert [s["i"] for s in kept] == [3, 4, 5]
    for s in kept:
        assert s[STATS_KEY]["subplot_detected"] is False
    grid_stats = stats_of(ImageSubplotFilter(), grids)
    assert all(c >= 0.5 for c in grid_stats["image_subplot_confidence"])
    assert all(n >= 3 for n in grid_stats["horizontal_peak_count"] + grid_stats["vertical_peak_count"])


@pytest.mark.slow
def test_subplot_filter_drops_by_any_or_all():
    grid, photo = asset("photo_grid.jpg"), asset("coffee.jpg")
    samples = [{"text": "", "images": imgs, "i": i} for i, imgs in enumerate(([grid, photo], [grid, grid], [photo]))]
    assert [s["i"] for s in run([ImageSubplotFilter()], samples)[0]] == [2]
    assert [s["i"] for s in run([ImageSubplotFilter(any_or_all="all")], samples)[0]] == [0, 2]


@pytest.mark.slow
@pytest.mark.parametrize("op", [ImageFaceCountFilter(min_face_count=0), ImageFaceRatioFilter(),
                                ImageSubplotFilter()], ids=lambda op: op.name)
def test_a_bad_image_rejects_its_sample_with_the_file_named(op, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not really a jpeg")
    cut = tmp_path / "cut.jpg"
    cut.write_bytes((ASSETS / "coffee.jpg").read_bytes()[:3000])
    odd = {"tiny.png": ((1, 1), "RGB"), "grey.png": ((80, 60), "L"), "alpha.png": ((80, 60), "RGBA")}
    for name, (size, mode) in odd.items():
        Image.new(mode, size).save(tmp_path / name)
    samples = [{"text": "", "images": [asset("coffee.jpg")]}, {"text": "", "images": [str(tmp_path / "gone.jpg")]},
               {"text": "", "images": [str(broken)]}, {"text": "", "images": [asset("coffee.jpg"), str(cut)]},
               *({"text": "", "images": [str(tmp_path / name)]} for name in odd)]
    kept, pipe = run([op], samples)
    assert len(kept) == 4  # the coffee photo and the three odd but readable images
    rejected = pipe.last_counts["rejected_records"]
    assert [r["code"] for r in rejected] == ["bad_image"] * 3
    for record, name in zip(rejected, ("gone.jpg", "broken.jpg", "cut.jpg")):
        assert name in record["reason"]


def test_a_missing_or_broken_cascade_fails_when_the_op_is_made(tmp_path):
    with pytest.raises(RecipeError, match="no cascade file at .*nowhere.xml"):
        ImageFaceCountFilter(cv_classifier=str(tmp_path / "nowhere.xml"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<opencv_storage>no cascade here</opencv_storage>")
    with pytest.raises(RecipeError, match="cannot load .*bad.xml as a cascade classifier"):
        ImageFaceRatioFilter(cv_classifier=str(bad))


def test_an_opencv_without_cascades_is_told_what_to_install(tmp_path, monkeypatch):
    """OpenCV 5 wheels ship no Haar cascades: the default cascade is missing, and the op says
    which file and what to install instead of finding no faces."""
    monkeypatch.setattr(cv2.data, "haarcascades", str(tmp_path) + os.sep)
    for cls in (ImageFaceCountFilter, ImageFaceRatioFilter):
        with pytest.raises(RecipeError, match=r"haarcascade_frontalface_alt.xml .*pip install '\.\[vision\]' in djx's checkout"):
            cls()
    monkeypatch.delattr(cv2, "data")
    with pytest.raises(RecipeError, match=r"ships no Haar cascades.*pip install '\.\[vision\]' in djx's checkout"):
        ImageFaceCountFilter()


@pytest.mark.parametrize("params, message", [
    ({"scaleFactor": 1.0}, "scaleFactor: must be above 1"), ({"minNeighbors": -1}, "minNeighbors: must be >= 0"),
    ({"minSize": [30]}, r"minSize: expected \[width, height\]"), ({"any_or_all": "most"}, "any_or_all"),
    ({"min_face_count": 3, "max_face_count": 2}, "no sample could pass")])
def test_bad_face_parameters_are_refused_at_load(params, message):
    with pytest.raises(RecipeError, match=message):
        ImageFaceCountFilter(**params)


@pytest.mark.parametrize("params, message", [
    ({"min_horizontal_lines": 0}, "min_horizontal_lines: must be >= 1"),
    ({"hough_threshold": 0}, "hough_threshold: must be >= 1"), ({"any_or_all": "some"}, "any_or_all")])
def test_bad_subplot_parameters_are_refused_at_load(params, message):
    with pytest.raises(RecipeError, match=message):
        ImageSubplotFilter(**params)


def face_recipe(write_recipe, folder, ops: list[dict]):
    write_jsonl_file(folder / "data.jsonl", [{"text": "x", "images": [asset("astronaut.jpg")]}])
    return write_recipe(folder / "recipe.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl", np=1,
                        process=ops)


@pytest.mark.slow
def test_a_recipe_names_its_cascade_relative_to_its_folder(tmp_path, write_recipe, djx_cli, monkeypatch):
    folder = tmp_path / "recipe"
    folder.mkdir()
    other = os.path.join(cv2.data.haarcascades, "haarcascade_frontalface_default.xml")
    shutil.copy(other, folder / "faces.xml")
    wide = {"min_face_count": 0, "max_face_count": 10}
    recipe = face_recipe(write_recipe, folder, [{"image_face_count_filter": {"cv_classifier": "faces.xml", **wide}},
                                                {"image_face_ratio_filter": {"cv_classifier": "", "max_ratio": 1.0}}])
    monkeypatch.chdir(tmp_path)  # not the recipe's folder
    result = djx_cli("process", recipe)
    assert result.rc == 0, result.err
    (row,) = read_jsonl_file(folder / "out" / "kept.jsonl")
    photo = [asset("astronaut.jpg")]
    assert row[STATS_KEY]["face_counts"] == stats_of(ImageFaceCountFilter(cv_classifier=other), photo)["face_counts"]
    assert row[STATS_KEY]["face_ratios"] == stats_of(ImageFaceRatioFilter(), photo)["face_ratios"]


@pytest.mark.slow
def test_a_run_with_a_missing_cascade_stops_at_load_and_writes_nothing(tmp_path, write_recipe, djx_cli):
    recipe = face_recipe(write_recipe, tmp_path, [{"image_face_count_filter": {"cv_classifier": "missing.xml"}}])
    result = djx_cli("process", recipe)
    assert result.rc != 0
    assert "image_face_count_filter: cv_classifier: no cascade file at missing.xml" in result.err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_without_opencv_the_ops_list_and_a_recipe_says_what_to_install(tmp_path, write_recipe):
    shim = tmp_path / "no_cv2_shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["cv2"] = None\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    cli = [sys.executable, "-m", "djx.cli"]
    probe = subprocess.run([sys.executable, "-c", "import cv2"], env=env, capture_output=True, text=True)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr  # the shim hides OpenCV
    shown = subprocess.run([*cli, "ops", "image_face_count_filter"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and "cv_classifier: str = ''" in shown.stdout
    recipe = face_recipe(write_recipe, tmp_path, [{"image_face_ratio_filter": {}}, {"image_subplot_filter": {}}])
    proc = subprocess.run([*cli, "process", str(recipe)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in ("image_face_ratio_filter", "image_subplot_filter"):
        assert f"{name}: needs the Python package 'cv2', which is not installed: " \
               f"pip install '.[vision]' in djx's checkout" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
