"""Images decode to the pixels Data-Juicer sees, on real file formats written by PIL at test time.

Data-Juicer opens an image with HF `datasets` (`Image().decode_example({"path": p, "bytes": None})`,
datasets >= 2.19) and then calls `.convert("RGB")`; `reference_rgb` below is that code path in a few
lines of PIL, so these tests need neither `datasets` nor Data-Juicer installed.
"""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import ExifTags, Image, ImageCms, ImageFile, ImageOps

from djx.core.errors import SampleError
from djx.core.op.images import BAD_IMAGE, BatchImages
from djx.core.recipe.recipe import recipe_from_dict
from djx import Pipeline

from conftest import read_jsonl_file

ORIENTATION = ExifTags.Base.Orientation
# how each EXIF orientation turns the upright picture into the stored one (the camera's view)
STORED_AS = {1: None, 2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
             4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
             6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_270}


def reference_rgb(path: Path) -> Image.Image:
    """Data-Juicer's decode: datasets' Image.decode_example (open, load the first frame, apply the
    EXIF orientation if the file has the tag), then convert("RGB")."""
    img = Image.open(path)
    img.load()
    if img.getexif().get(ORIENTATION) is not None:
        img = ImageOps.exif_transpose(img)
    return img.convert("RGB")


def picture(w: int = 48, h: int = 32, seed: int = 0) -> Image.Image:
    """A photo-like RGB picture with no symmetry, so every flip or rotation shows."""
    x, y = np.meshgrid(np.arange(w), np.arange(h))
    blue = 127 + 100 * np.sin(x / 5 + seed * 2) * np.cos(y / 7)  # smooth: JPEG keeps it within a few levels
    rgb = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), blue], -1)
    return Image.fromarray(rgb.astype(np.uint8))


def exif_with(orientation: int) -> Image.Exif:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    return exif


def write_png(path: Path, w: int, h: int, bit_depth: int, color_type: int, raw: bytes) -> None:
    """A PNG chunk by chunk, for what PIL cannot write; `raw` is the filtered scanlines."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))


def png16(path: Path, color_type: int, w: int = 40, h: int = 24) -> None:
    """A 16-bit-per-channel RGB (2) or RGBA (6) PNG, which PIL cannot write."""
    channels = {2: 3, 6: 4}[color_type]
    x, y = np.meshgrid(np.arange(w), np.arange(h))
    planes = [x * 1601, y * 2731, (x * y * 97) % 65536, np.full_like(x, 40000)][:channels]
    rows = np.stack(planes, -1).astype(">u2")
    write_png(path, w, h, 16, color_type, b"".join(b"\x00" + row.tobytes() for row in rows))


def ycck_jpeg(path: Path) -> None:
    """PIL writes CMYK JPEGs but not YCCK (the usual Photoshop CMYK): write CMYK and flip the Adobe
    marker's transform byte to 2, so libjpeg reads the stored planes as YCCK."""
    buf = io.BytesIO()
    Image.merge("CMYK", [*picture().split(), picture(seed=3).split()[2]]).save(buf, "JPEG", quality=90)
    data = bytearray(buf.getvalue())
    at = data.index(b"Adobe\x00") + 11  # "Adobe", version (2), flags0 (2), flags1 (2), transform
    assert data[at] == 0
    data[at] = 2
    path.write_bytes(bytes(data))


def exif_after_data(path: Path, img: Image.Image, orientation: int) -> None:
    """A PNG whose eXIf chunk comes after its pixel data (older writers put it there): Pillow reads
    it only when the pixels load."""
    img.save(path)
    data = path.read_bytes()
    exif = exif_with(orientation).tobytes()
    chunk = struct.pack(">I", len(exif)) + b"eXIf" + exif + struct.pack(">I", zlib.crc32(b"eXIf" + exif))
    end = data.rindex(b"IEND") - 4
    path.write_bytes(data[:end] + chunk + data[end:])


def build_corpus(folder: Path) -> dict[str, Path]:
    """Every format case Data-Juicer users feed in, written by PIL: name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}

    def save(name: str, img: Image.Image, **kw) -> None:
        files[name] = folder / name
        img.save(files[name], **kw)

    upright = picture()
    for o, stored_as in STORED_AS.items():
        stored = upright if stored_as is None else upright.transpose(stored_as)
        save(f"orientation_{o}.jpg", stored, exif=exif_with(o), quality=92)
        save(f"orientation_{o}.png", stored, exif=exif_with(o))
    save("orientation_6.webp", upright.transpose(STORED_AS[6]), exif=exif_with(6), lossless=True)
    save("orientation_8.tif", upright.transpose(STORED_AS[8]), exif=exif_with(8))
    xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-'
           b'rdf-syntax-ns#"><rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" '
           b'tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>')
    save("xmp_orientation_6.jpg", upright.transpose(STORED_AS[6]), xmp=xmp)
    files["exif_after_data_6.png"] = folder / "exif_after_data_6.png"
    exif_after_data(files["exif_after_data_6.png"], upright.transpose(STORED_AS[6]), 6)

    cmyk = Image.merge("CMYK", [*picture().split(), picture(seed=3).split()[2]])
    save("cmyk.jpg", cmyk, quality=90)
    files["ycck.jpg"] = folder / "ycck.jpg"
    ycck_jpeg(files["ycck.jpg"])
    save("progressive.jpg", picture(160, 120), progressive=True, quality=85)
    save("subsampling_420.jpg", picture(97, 61), subsampling=2, quality=75)
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    save("icc_large.jpg", picture(), icc_profile=srgb + bytes(200_000 - len(srgb)))  # 4 APP2 markers
    save("icc_srgb.png", picture(), icc_profile=srgb)

    palette = picture().convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    save("palette_trns.png", palette, transparency=3)
    save("palette.gif", palette, transparency=5)
    save("trns_rgb.png", picture(), transparency=(0, 0, 0))  # a colour that is transparent (tRNS)
    save("L.png", picture().convert("L"))
    save("LA.png", picture().convert("LA"))
    rgba = picture().convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(rgba.size))  # alpha 0..255 over the rows
    save("RGBA.png", rgba)
    save("RGBA.webp", rgba, lossless=True)
    save("bilevel.png", picture().convert("1"))
    save("bilevel.tif", picture().convert("1"), compression="group4")
    gray16 = np.arange(40 * 24, dtype=np.uint16).reshape(24, 40) * 68  # 0..65212
    save("I16.png", Image.fromarray(gray16))
    save("I32.tif", Image.fromarray(gray16.astype(np.int32) - 1000))
    save("F32.tif", Image.fromarray(gray16.astype(np.float32) / 256))
    for name, color_type in (("rgb16.png", 2), ("rgba16.png", 6)):
        files[name] = folder / name
        png16(files[name], color_type)

    frames = [picture(seed=s) for s in range(3)]
    save("animated.gif", frames[0], save_all=True, append_images=frames[1:], duration=50, loop=0)
    save("animated.webp", frames[0], save_all=True, append_images=frames[1:], duration=50, lossless=True)
    save("animated.png", frames[0], save_all=True, append_images=frames[1:], duration=50)
    save("multipage.tif", frames[0], save_all=True, append_images=frames[1:])
    save("stereo.mpo", frames[0], format="MPO", save_all=True, append_images=frames[1:2])

    save("one_pixel.png", Image.new("RGB", (1, 1), (12, 34, 56)))
    save("one_pixel.jpg", Image.new("RGB", (1, 1), (12, 34, 56)))
    save("wide.jpg", picture(12000, 3), quality=90)
    save("wide.png", picture(30000, 1))
    save("tall.webp", picture(2, 9000))
    save("png_named.jpg", picture(), format="PNG")  # extensions that lie: content decides
    save("jpeg_named.png", picture(), format="JPEG")
    save("webp_named.gif", picture(), format="WEBP")
    return files


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return build_corpus(tmp_path_factory.mktemp("corpus"))


CASES = (
    *(f"orientation_{o}.{ext}" for o in STORED_AS for ext in ("jpg", "png")),
    "orientation_6.webp", "orientation_8.tif", "xmp_orientation_6.jpg", "exif_after_data_6.png",
    "cmyk.jpg", "ycck.jpg", "progressive.jpg", "subsampling_420.jpg", "icc_large.jpg", "icc_srgb.png",
    "palette_trns.png", "palette.gif", "trns_rgb.png", "L.png", "LA.png", "RGBA.png", "RGBA.webp", "bilevel.png",
    "bilevel.tif", "I16.png", "I32.tif", "F32.tif", "rgb16.png", "rgba16.png",
    "animated.gif", "animated.webp", "animated.png", "multipage.tif", "stereo.mpo",
    "one_pixel.png", "one_pixel.jpg", "wide.jpg", "wide.png", "tall.webp",
    "png_named.jpg", "jpeg_named.png", "webp_named.gif",
)


def test_the_corpus_holds_every_case(corpus):
    assert sorted(corpus) == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_every_format_decodes_to_data_juicers_pixels(corpus, name):
    path = corpus[name]
    images = BatchImages(str(path.parent), 10**9)
    got = images.rgb(path.name)
    want = reference_rgb(path)
    assert got.mode == "RGB" and got.size == want.size
    assert np.array_equal(np.asarray(got), np.asarray(want))
    if name != "exif_after_data_6.png":  # its orientation is not in the header (docs/decoding.md)
        assert images.size(path.name) == got.size  # header-only size = the decoded (upright) size
    images.close()


@pytest.mark.parametrize("name", [f"orientation_{o}.{ext}" for o in STORED_AS for ext in ("png", "jpg")]
                         + ["orientation_6.webp", "orientation_8.tif", "xmp_orientation_6.jpg",
                            "exif_after_data_6.png"])
def test_a_photo_stored_sideways_is_seen_upright(corpus, name):
    images = BatchImages(str(corpus[name].parent), 10**9)
    header = images.size(name)  # read first: a look at the header must not hide a later eXIf chunk
    got = np.asarray(images.rgb(name), dtype=int)
    upright = np.asarray(picture(), dtype=int)
    assert got.shape == upright.shape
    assert header == ((32, 48) if name == "exif_after_data_6.png" else (48, 32))
    if name.endswith(".jpg"):
        assert np.abs(got - upright).mean() < 4  # lossy, but the right way up (a wrong one: > 60)
    else:
        assert np.array_equal(got, upright)


def test_the_formats_are_what_they_claim(corpus):
    """The corpus really exercises each decoder path (a case that silently fell back would prove nothing)."""
    def opened(name):
        return Image.open(corpus[name])
    assert opened("cmyk.jpg").mode == "CMYK" and opened("ycck.jpg").info["adobe_transform"] == 2
    assert not np.array_equal(np.asarray(reference_rgb(corpus["cmyk.jpg"])),
                              np.asarray(reference_rgb(corpus["ycck.jpg"])))
    assert opened("progressive.jpg").info.get("progressive") == 1
    assert len(opened("icc_large.jpg").info["icc_profile"]) == 200_000
    assert opened("palette_trns.png").mode == "P" and "transparency" in opened("palette_trns.png").info
    assert [opened(n).mode for n in ("L.png", "LA.png", "RGBA.png", "bilevel.png", "I16.png")] == \
        ["L", "LA", "RGBA", "1", "I;16"]
    for name, mode in (("rgb16.png", "RGB"), ("rgba16.png", "RGBA")):  # IHDR bit depth 16, read at 8
        assert corpus[name].read_bytes()[24] == 16 and opened(name).mode == mode
    for name in ("animated.gif", "animated.webp", "animated.png", "multipage.tif"):
        assert opened(name).n_frames == 3, name
    assert opened("stereo.mpo").format == "MPO" and opened("stereo.mpo").n_frames == 2
    assert opened("png_named.jpg").format == "PNG" and opened("jpeg_named.png").format == "JPEG"
    assert opened("webp_named.gif").format == "WEBP"


def test_a_multi_frame_file_gives_its_first_frame(corpus):
    images = BatchImages(str(next(iter(corpus.values())).parent), 10**9)
    first = np.asarray(picture(seed=0), dtype=int)
    assert np.abs(np.asarray(picture(seed=1), dtype=int) - first).mean() > 20  # frames tell apart
    for name in ("animated.webp", "animated.png", "multipage.tif", "stereo.mpo", "animated.gif"):
        got = np.asarray(images.rgb(name), dtype=int)
        tolerance = {"stereo.mpo": 4, "animated.gif": 12}.get(name, 0)  # JPEG, and GIF's 256 colours
        assert np.abs(got - first).mean() <= tolerance, name


def test_mode_conversions_follow_pillows_convert(corpus):
    """What convert("RGB") does, and so what Data-Juicer scores: alpha and transparency are dropped
    (not composited on white), and 16-bit grey clips at 255 instead of scaling."""
    images = BatchImages(str(next(iter(corpus.values())).parent), 10**9)
    rgba = np.asarray(Image.open(corpus["RGBA.png"]))
    assert np.array_equal(np.asarray(images.rgb("RGBA.png")), rgba[..., :3])
    grey = np.asarray(images.rgb("I16.png"))[..., 0]
    stored = np.asarray(Image.open(corpus["I16.png"]), dtype=int)
    assert np.array_equal(grey, np.minimum(stored, 255))


@pytest.mark.parametrize("name", ["palette_trns.png", "palette.gif", "trns_rgb.png"])
def test_a_transparency_colour_is_dropped_not_composited_onto_white_by_the_processor(corpus, name):
    """transformers >= 5's processors composite an image with a transparency colour onto white;
    Data-Juicer's decode (with its transformers 4.57) scores the colours stored: the decoded image
    carries no transparency left for a processor to find."""
    from transformers import CLIPImageProcessor
    processor = CLIPImageProcessor.from_pretrained(Path(__file__).parent / "assets" / "models" / "tiny-clip")
    images = BatchImages(str(corpus[name].parent), 10**9)
    got = images.rgb(name)
    assert "transparency" not in got.info
    stored = Image.fromarray(np.asarray(reference_rgb(corpus[name])))  # the pixels, no info
    assert np.array_equal(processor(got, return_tensors="np")["pixel_values"],
                          processor(stored, return_tensors="np")["pixel_values"])


def test_draft_decode_gives_a_smaller_upright_image(tmp_path):
    """The ops' opt-in draft_decode: JPEG draft mode at a scale >= target, orientation still applied."""
    picture(800, 600).save(tmp_path / "big.jpg", quality=90)
    picture(800, 600).transpose(STORED_AS[6]).save(tmp_path / "big_6.jpg", exif=exif_with(6), quality=90)
    picture(800, 600).save(tmp_path / "big.mpo", format="MPO", save_all=True, append_images=[picture(800, 600)])
    images = BatchImages(str(tmp_path), 10**9)
    assert images.rgb("big.jpg", target=224).size == (400, 300)
    assert images.rgb("big_6.jpg", target=224).size == (400, 300)
    assert images.rgb("big.mpo", target=224).size == (400, 300)
    assert images.rgb("big.jpg").size == (800, 600)  # without a target: full size, a separate entry
    full = np.asarray(images.rgb("big.jpg").resize((400, 300)), dtype=int)
    assert np.abs(np.asarray(images.rgb("big.jpg", target=224), dtype=int) - full).mean() < 6


def test_max_image_pixels_is_the_runs_bomb_guard_above_and_below_pillows_own(tmp_path):
    """Pillow refuses more than 2 x Image.MAX_IMAGE_PIXELS (178,956,970) pixels process-wide; the
    recipe's max_image_pixels decides instead, both ways, from the header alone."""
    write_png(tmp_path / "panorama.png", 20_000, 9_000, 1, 0, b"")  # a header claiming 180 M pixels
    picture(400, 300).save(tmp_path / "photo.png")
    with pytest.raises(SampleError, match="panorama.png.*exceeds the limit of 178956970.*max_image_pixels"):
        BatchImages(str(tmp_path), 178_956_970).size("panorama.png")
    assert BatchImages(str(tmp_path), 200_000_000).size("panorama.png") == (20_000, 9_000)
    with pytest.raises(SampleError, match="photo.png.*exceeds the limit of 100000"):
        BatchImages(str(tmp_path), 100_000).rgb("photo.png")
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # Pillow's default, untouched


# -- truncated files -----------------------------------------------------------------------------
@pytest.fixture
def truncated(tmp_path) -> Path:
    """A baseline JPEG cut after 40% of its bytes (a partial download): the header is intact."""
    for ext in ("jpg", "png"):
        picture(256, 256).save(tmp_path / f"full.{ext}")
        data = (tmp_path / f"full.{ext}").read_bytes()
        (tmp_path / f"cut.{ext}").write_bytes(data[: len(data) * 4 // 10])
    return tmp_path


@pytest.mark.parametrize("name", ["cut.jpg", "cut.png"])
def test_a_truncated_image_is_rejected_by_default(truncated, name):
    images = BatchImages(str(truncated), 10**9)
    with pytest.raises(SampleError, match=f"{name}.*cannot decode.*load_truncated_images") as e:
        images.rgb(name)
    assert e.value.code == BAD_IMAGE
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_a_truncated_image_is_rejected_even_if_other_code_set_pillows_global(truncated, monkeypatch):
    """`import data_juicer` sets ImageFile.LOAD_TRUNCATED_IMAGES = True for the whole process; djx
    keeps to the run's choice and leaves the global as it found it."""
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    with pytest.raises(SampleError, match="cut.jpg.*cannot decode"):
        BatchImages(str(truncated), 10**9).rgb("cut.jpg")
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True


@pytest.mark.parametrize("name", ["cut.jpg", "cut.png"])
def test_load_truncated_images_decodes_what_data_juicer_decodes(truncated, monkeypatch, name):
    got = BatchImages(str(truncated), 10**9, load_truncated_images=True).rgb(name)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False  # the run's choice did not leak
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # Data-Juicer's global
    want = reference_rgb(truncated / name)
    assert got.size == want.size == (256, 256)
    assert np.array_equal(np.asarray(got), np.asarray(want))
    # the rows that were in the file are the complete file's rows
    complete = np.asarray(reference_rgb(truncated / name.replace("cut", "full")), dtype=int)
    assert np.abs(np.asarray(got, dtype=int)[:32] - complete[:32]).max() <= 1


PLUGIN = '''
from djx import Filter, register_op
from djx.core.errors import SampleError


@register_op("mean_red_filter")
class MeanRedFilter(Filter):
    """Mean red value of the sample's first image: a plug-in that reads decoded pixels."""
    stats_keys = ("mean_red",)
    uses_images = True

    def compute_stats(self, batch):
        for i, sample in enumerate(batch.samples):
            try:
                img = batch.images.rgb(batch.image_refs(sample)[0])
            except SampleError as e:
                batch.reject(i, str(e), e.code)
                continue
            batch.stats(sample)["mean_red"] = sum(img.getdata(0)) / (img.width * img.height)

    def keep(self, stats):
        return True
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plugin") / "mean_red_ops.py"
    path.write_text(PLUGIN)
    return str(path)


@pytest.mark.parametrize("load_truncated", [False, True])
def test_the_recipe_key_load_truncated_images_reaches_every_worker(truncated, plugin, load_truncated):
    data = truncated / "data.jsonl"
    data.write_text('{"text": "whole", "images": ["full.jpg"]}\n{"text": "cut", "images": ["cut.jpg"]}\n')
    recipe = recipe_from_dict({
        "dataset_path": str(data), "export_path": str(truncated / "out" / "o.jsonl"),
        "process": [{"mean_red_filter": {}}], "custom_ops": [plugin], "np": 2,
        "batch_size": 1, "start_method": "fork", "load_truncated_images": load_truncated,
    }, base_dir=str(truncated))
    summary = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    kept = [r["text"] for r in read_jsonl_file(truncated / "out" / "o.jsonl")]
    rejected = read_jsonl_file(truncated / "out" / "o.rejected.jsonl")
    if load_truncated:
        assert kept == ["whole", "cut"] and rejected == []
    else:
        assert kept == ["whole"] and [r["code"] for r in rejected] == [BAD_IMAGE]
        assert "cut.jpg" in rejected[0]["reason"]
    assert summary["check"]["ok"]
