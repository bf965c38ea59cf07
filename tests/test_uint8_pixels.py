"""Prepared pixels travel as uint8 and are rescaled and normalised where the model is.

The model gets the same float32 pixels as the processor's full output (within 1e-6) on real photos
of odd sizes, for CLIP's and BLIP's processors as their models ship them; a processor whose pixels
are not integral without its rescale and normalisation keeps its float pixels; batches join with
their tables; scores from uint8 pixels equal those from the float pixels. Runs in both ends of the
supported transformers range (.ci/run's second leg)."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from djx.core.models.pool import ModelPool
from djx.ops.common.pixels import processor_pixels, to_model, value_table
from djx.ops.common.prepared import PreparedPairs, join
from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
from djx.ops.filter.image_text_model_filter import max_text_len
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter

from test_multimodal import BLIP, CLIP, IMG
from test_prepare_score import batch_of

pytestmark = pytest.mark.slow

ASSETS = Path(__file__).parent / "assets"
PHOTOS = sorted((ASSETS / "faces").glob("*.jpg")) + sorted((ASSETS / "dj_fixtures" / "image_models").glob("*.*"))
MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
# the image processor configs of openai/clip-vit-base-patch32 and Salesforce/blip-itm-base-coco
CONFIGS = {
    "clip-224": {"image_processor_type": "CLIPImageProcessor", "do_resize": True, "size": {"shortest_edge": 224},
                 "resample": 3, "do_center_crop": True, "crop_size": {"height": 224, "width": 224},
                 "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                 "image_mean": MEAN, "image_std": STD, "do_convert_rgb": True},
    "blip-384": {"image_processor_type": "BlipImageProcessor", "do_resize": True, "size": {"height": 384, "width": 384},
                 "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                 "image_mean": MEAN, "image_std": STD, "do_convert_rgb": True},
}


def photos():
    return [ImageOps.exif_transpose(Image.open(p)).convert("RGB") for p in PHOTOS]


def image_processor(tmp_path, name):
    from transformers import AutoImageProcessor
    if name in ("tiny-clip", "tiny-blip"):
        return AutoImageProcessor.from_pretrained(CLIP if name == "tiny-clip" else BLIP)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(CONFIGS[name]))
    return AutoImageProcessor.from_pretrained(str(tmp_path))


@pytest.mark.parametrize("name", ["clip-224", "blip-384", "tiny-clip", "tiny-blip"])
def test_uint8_pixels_normalised_where_the_model_is_equal_the_processors_output(tmp_path, name):
    proc, images = image_processor(tmp_path, name), photos()
    assert len({im.size for im in images}) > 10  # odd sizes, not one
    pixels, table = processor_pixels(proc, images)
    assert pixels.dtype == torch.uint8 and table.dtype == torch.float32 and table.shape == (3, 256)
    full = proc(images, return_tensors="pt")["pixel_values"]
    got = to_model(pickle.loads(pickle.dumps(pixels)), table, "cpu", torch.float32)
    assert got.dtype == torch.float32 and got.shape == full.shape
    assert float((got - full).abs().max()) <= 1e-6
    assert pixels.nbytes * 4 == full.nbytes  # a quarter of the bytes to hand over


def test_a_processor_whose_pixels_are_not_plain_uint8_keeps_its_float_pixels():
    # EfficientNet's processor (include_top) scales its pixels past 255 even without rescale and
    # normalisation: they cannot travel as uint8
    from transformers import EfficientNetImageProcessor
    proc = EfficientNetImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 60, "width": 60})
    images = photos()
    pixels, table = processor_pixels(proc, images)
    assert table is None and pixels.dtype == torch.float32
    assert torch.equal(pixels, proc(images, return_tensors="pt")["pixel_values"])
    assert torch.equal(to_model(pixels, table, "cpu", torch.float32), pixels)
    assert value_table(proc) is None  # nor can its JPEGs be decoded on a device (image_decode: device)


def test_join_keeps_one_table_and_refuses_two(tmp_path):
    images = photos()
    clip = image_processor(tmp_path, "tiny-clip")
    a, b = (PreparedPairs(pixels, [[1]], [(0, 0)], table)
            for pixels, table in (processor_pixels(clip, images[:3]), processor_pixels(clip, images[3:6])))
    joined = join([a, b])
    assert joined.pixels.dtype == torch.uint8 and joined.pairs == [(0, 0), (1, 3)]
    assert torch.equal(to_model(joined.pixels, joined.pixel_table, "cpu", torch.float32),
                       clip(images[:6], return_tensors="pt")["pixel_values"])
    # a float part beside a uint8 part: the uint8 part is looked up, the rows are the processor's
    floats = PreparedPairs(clip(images[3:6], return_tensors="pt")["pixel_values"], [[1]], [(0, 0)])
    mixed = join([a, floats])
    assert mixed.pixel_table is None and mixed.pixels.dtype == torch.float32
    assert float((mixed.pixels[:] - clip(images[:6], return_tensors="pt")["pixel_values"]).abs().max()) <= 1e-6
    other = PreparedPairs(b.pixels, [[1]], [(0, 0)], (b.pixel_table - 0.5))  # another normalisation
    with pytest.raises(ValueError, match="different normalisations"):
        join([a, other])


@pytest.mark.models
@pytest.mark.parametrize("kind", ["clip", "blip"])
def test_scores_from_uint8_pixels_equal_the_float_path(tmp_path, kind):
    op = (ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0) if kind == "clip"
          else ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0))
    pool = ModelPool("cpu")
    samples = [{"text": f"{IMG} a photo number {i}", "images": [str(p)]} for i, p in enumerate(PHOTOS)]
    loaded = pool.get(op.spec)
    batch = batch_of(samples, tmp_path, pool)
    prepared, _ = op.prepare(batch, loaded.processor, max_text_len(loaded.model))
    assert prepared.pixels.dtype == torch.uint8
    # the float path: the processor's full output on the same decoded images
    images = [batch.images.rgb(batch.image_refs(s)[0], 0) for s in batch.samples]
    as_float = PreparedPairs(loaded.processor.image_processor(images, return_tensors="pt")["pixel_values"],
                             prepared.tokens, prepared.pairs)
    with torch.inference_mode():
        got, want = op.score(loaded, prepared), op.score(loaded, as_float)
    assert len(got) == len(PHOTOS)
    assert max(abs(g - w) for g, w in zip(got, want)) <= 1e-6


@pytest.mark.parametrize("name", ["clip-224", "blip-384", "tiny-clip"])
def test_the_device_paths_resize_gives_the_processors_pixels_bit_for_bit(tmp_path, name):
    """image_decode: device resizes and crops on the GPU with Pillow's bicubic as tensor operations
    (ops/common/pillow_resize.py): the same pixels the processor makes with Pillow, on real photos
    of odd sizes (torchvision's resize differed by a level here and there: 4.5e-4 in a CLIP score).
    The tensor code is the device's; run here on the CPU."""
    from djx.ops.common import device_decode
    proc, images = image_processor(tmp_path, name), photos()[:8]
    geo = device_decode.geometry(proc)
    assert geo is not None
    host, _ = processor_pixels(proc, images)
    assert host.dtype == torch.uint8
    for k, image in enumerate(images):
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1).contiguous()
        assert torch.equal(device_decode._resize(pixels, geo), host[k]), (name, image.size)


def test_the_device_path_resizes_a_batch_of_mixed_sizes_as_the_processor_does_each(tmp_path):
    """image_decode: device resizes the images of one size in one batched pass (per image, the
    passes' kernels cost more in launches than in work on a GPU): the batch of real photos of odd
    sizes, each size several times and in slices smaller than a size's group, with a flip, gives
    each image's own processor pixels, in order; rows already at the processor's size pass as
    they are."""
    from djx.ops.common import device_decode
    proc, images = image_processor(tmp_path, "clip-224"), photos()[:6]
    images = [ImageOps.mirror(im) for im in images + images[:3] + images[:2]]  # sizes repeat, out of order
    geo = dict(device_decode.geometry(proc), hflip=True)
    host, _ = processor_pixels(proc, images)
    tensors = [torch.from_numpy(np.array(ImageOps.mirror(im))).permute(2, 0, 1).contiguous() for im in images]
    tensors[4] = host[4]  # as the host decodes a JPEG the device refused
    small = max(int(t.shape[-2] * t.shape[-1]) for t in tensors)  # one image a slice
    for chunk in (1 << 24, small):
        got = device_decode.resize_all(tensors, geo, done={4}, chunk_pixels=chunk)
        assert got.shape == host.shape and torch.equal(got, host), chunk


def test_pixels_made_a_group_at_a_time_equal_one_call_and_each_group_is_released_as_it_is_made(tmp_path,
                                                                                               monkeypatch):
    from djx.ops.common import pixels as pixel_module
    proc, images = image_processor(tmp_path, "clip-224"), photos()[:7]
    group = sum(im.width * im.height * 3 for im in images[:3])
    monkeypatch.setattr(pixel_module, "GROUP_BYTES", group)  # a group of three photos
    released, made = [], []
    rows = pixel_module.PixelRows(proc, released.append)
    for k, image in enumerate(images):
        rows.add(f"p{k}", image)
        made.append(list(released))
    assert made[1] == [] and made[2] == ["p0", "p1", "p2"]  # released once their pixels are made
    pixels, table = rows.pixels()
    assert released == [f"p{k}" for k in range(7)]
    whole, whole_table = processor_pixels(proc, images)
    assert torch.equal(pixels, whole) and torch.equal(table, whole_table)
    assert pixel_module.PixelRows(proc, released.append).pixels() == (None, None)
