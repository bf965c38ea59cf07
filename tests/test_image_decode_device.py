"""`image_decode: device` (JPEGs decoded and resized on the model's GPU): a recipe that asks for it
where torchvision does not import, or where no CUDA device is visible, fails at load with one line
saying what to install or provide, and writes nothing. On a machine with both, the GPU path's
scores are compared with the host path's (tools/gpu_check.py --only decode measures it too)."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageOps

from djx.ops.common import device_decode

from test_multimodal import BLIP, CLIP, IMG

pytestmark = pytest.mark.slow

ASSETS = Path(__file__).parent / "assets"
NO_TORCHVISION = 'import sys\nsys.modules["torchvision"] = None\n'


def run_recipe(tmp_path, op: str, model_param: str, model: str, env: dict):
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": f"{IMG} a cup of coffee",
                                                     "images": [str(ASSETS / "faces" / "coffee.jpg")]}) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": "data.jsonl", "export_path": "out/kept.jsonl",
                                      "process": [{op: {model_param: model, "image_decode": "device"}}]}))
    return subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_refused_at_load(tmp_path, proc, what: str):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "image_decode: device needs torchvision" in lines[0] and what in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("op,param,model", [("image_text_similarity_filter", "hf_clip", CLIP),
                                            ("image_text_matching_filter", "hf_blip", BLIP)])
def test_without_torchvision_the_recipe_fails_at_load_naming_it(tmp_path, op, param, model):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_TORCHVISION)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    probe = subprocess.run([sys.executable, "-c", "import torchvision"], env=env, capture_output=True, text=True)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr  # the shim works
    assert_refused_at_load(tmp_path, run_recipe(tmp_path, op, param, model, env), "torchvision does not import")


def test_without_a_cuda_device_the_recipe_fails_at_load_naming_it(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = run_recipe(tmp_path, "image_text_similarity_filter", "hf_clip", CLIP, env)
    assert_refused_at_load(tmp_path, proc, "no CUDA device is visible")


def test_the_device_path_follows_the_processors_geometry():
    from transformers import AutoImageProcessor
    clip = AutoImageProcessor.from_pretrained(CLIP)  # shortest edge 32, centre crop 32x32
    blip = AutoImageProcessor.from_pretrained(BLIP)  # 32x32, no crop
    assert device_decode.geometry(clip) == {"shortest_edge": 32, "height": None, "width": None, "crop": (32, 32)}
    assert device_decode.geometry(blip) == {"shortest_edge": None, "height": 32, "width": 32, "crop": None}
    clip.resample = 2  # bilinear: not what the device path resizes with, so the host decodes
    assert device_decode.geometry(clip) is None
    assert device_decode.is_jpeg((ASSETS / "faces" / "coffee.jpg").read_bytes())
    assert not device_decode.is_jpeg((ASSETS / "faces" / "chart_grid.png").read_bytes())
    jpeg = (ASSETS / "faces" / "coffee.jpg").read_bytes()
    assert not device_decode.is_jpeg(jpeg[:len(jpeg) // 2])  # truncated: the host decodes it, under the run's rules


def test_jpeg_bytes_join_in_their_image_rows_beside_decoded_pixels():
    import torch

    from djx.ops.common.prepared import PreparedPairs, join
    table, geo = torch.zeros(3, 256), {"shortest_edge": 32, "height": None, "width": None, "crop": (32, 32)}
    jpeg = torch.frombuffer(bytearray((ASSETS / "faces" / "coffee.jpg").read_bytes()), dtype=torch.uint8)
    a = PreparedPairs(torch.zeros(2, 3, 32, 32, dtype=torch.uint8), [[1]], [(0, 0), (0, 1), (0, 2)], table,
                      [jpeg], [1], geo)  # rows 0 and 2 decoded on the host, row 1 a JPEG
    b = PreparedPairs(None, [[2]], [(0, 0)], table, [jpeg], [0], geo)  # one JPEG only
    joined = join([a, b])
    assert joined.n_images == 4 and joined.jpeg_rows == [1, 3] and joined.pixels.shape[0] == 2
    assert joined.pairs == [(0, 0), (0, 1), (0, 2), (1, 3)] and joined.geometry == geo
    assert joined.jpeg_orientations == [1, 1]
    c = PreparedPairs(None, [[4]], [(0, 0)], table, [jpeg], [0], geo, [6])  # a camera's upright-by-EXIF photo
    assert join([a, c, b]).jpeg_orientations == [1, 6, 1]
    floats = PreparedPairs(torch.zeros(1, 3, 32, 32), [[3]], [(0, 0)])  # float pixels: no table to decode with
    with pytest.raises(ValueError, match="beside float pixels"):
        join([a, floats])


def test_the_host_hands_the_device_only_jpegs_it_decodes_as_pillow_does_with_their_orientation():
    """nvJPEG decodes YCbCr and greyscale JPEGs as libjpeg does (within its rounding) but ignores
    EXIF orientation (torchvision applies it on its CPU decode only) and converts CMYK otherwise
    than Pillow: the host reads the orientation from the header for the device to apply, and keeps
    CMYK JPEGs to decode itself. Seen on an H100: EXIF-rotated photos scored unrotated."""
    faces, models = ASSETS / "faces", ASSETS / "dj_fixtures" / "image_models"
    for name, orientation in (("exif-orientation-3.jpg", 3), ("exif-orientation-6.jpg", 6),
                              ("exif-orientation-8.jpg", 8)):
        got = device_decode.jpeg_file((models / name).read_bytes())
        assert got is not None and got.orientation == orientation, name
    assert device_decode.jpeg_file((faces / "astronaut_exif6.jpg").read_bytes()).orientation == 6
    assert device_decode.jpeg_file((faces / "coffee.jpg").read_bytes()) == ((faces / "coffee.jpg").read_bytes(), 1)
    assert device_decode.jpeg_file((models / "cmyk.jpg").read_bytes()) is None
    grey = io.BytesIO()
    Image.new("L", (20, 10), 128).save(grey, "JPEG")
    assert device_decode.jpeg_file(grey.getvalue()).orientation == 1


@pytest.mark.parametrize("orientation", range(1, 9))
def test_the_device_turns_an_image_upright_as_pillow_does(orientation):
    import numpy as np
    import torch
    pixels = np.random.default_rng(orientation).integers(0, 256, (7, 11, 3), dtype=np.uint8)  # not square
    image = Image.fromarray(pixels)
    image.getexif()[0x0112] = orientation
    want = np.asarray(ImageOps.exif_transpose(image))
    got = device_decode.upright(torch.from_numpy(pixels).permute(2, 0, 1), orientation).permute(1, 2, 0)
    assert got.shape == want.shape and np.array_equal(got.numpy(), want)


@pytest.mark.models
@pytest.mark.skipif(device_decode.problem() is not None, reason="needs torchvision and a CUDA device")
@pytest.mark.parametrize("kind", ["clip", "blip"])
def test_on_a_gpu_scores_from_device_decode_are_close_to_the_host_paths(tmp_path, kind):
    import torch

    from djx.core.models.pool import ModelPool
    from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
    from djx.ops.filter.image_text_model_filter import max_text_len
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter

    from test_prepare_score import batch_of
    photos = sorted((ASSETS / "faces").glob("*.*g")) + sorted((ASSETS / "dj_fixtures" / "image_models").glob("*.*"))
    samples = [{"text": f"{IMG} a photo number {i}", "images": [str(p)]} for i, p in enumerate(photos)]
    scores = {}
    for decode in ("cpu", "device"):
        op = (ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, image_decode=decode) if kind == "clip"
              else ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0, image_decode=decode))
        pool = ModelPool("cuda:0")
        loaded = pool.get(op.spec)
        prepared, _ = op.prepare(batch_of(samples, tmp_path, pool), loaded.processor, max_text_len(loaded.model))
        assert (len(prepared.jpegs) > 0) == (decode == "device")
        with torch.inference_mode():
            scores[decode] = op.score(loaded, prepared)
    assert max(abs(a - b) for a, b in zip(scores["cpu"], scores["device"])) <= 1e-4


def test_the_recipes_check_imports_neither_torch_nor_torchvision(tmp_path):
    """The check at the recipe's load reads metadata and asks nvidia-smi (here a stand-in that lists
    one GPU): the main process, which decodes nothing, does not pay for importing torch and
    torchvision (9 s of an H100 run's start)."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho '0, GPU-1234, 81000, 81559'\n")
    smi.chmod(0o755)
    code = ("import sys; from djx.ops.common import device_decode; p = device_decode.problem(); "
            "print(repr(p)); print('torch' in sys.modules, 'torchvision' in sys.modules)")
    env = dict(os.environ, PATH=f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said, imported = proc.stdout.splitlines()[-2:]
    assert imported == "False False"
    assert ("no CUDA device" not in said) and (said == "None" or "torchvision does not import" in said)


def test_a_torchvision_built_for_another_torch_is_named_at_load(monkeypatch):
    import importlib.util
    from importlib.machinery import ModuleSpec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: ModuleSpec(name, None))
    monkeypatch.setattr(device_decode, "_torch_wanted", lambda: "2.0.0")
    monkeypatch.setattr(device_decode, "_version", lambda dist: "2.13.0")
    import shutil
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no nvidia-smi: torch is asked
    said = device_decode.problem() or ""
    assert "built for torch 2.0.0, not this torch 2.13.0" in said
